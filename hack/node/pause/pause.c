/* The node's sandbox ("pause") process, for the sandbox image that
 * hack/node/images.sh assembles: it holds a pod's namespaces, reaps the
 * zombies reparented to it and exits on SIGINT or SIGTERM. Built
 * statically (gcc -static) because the image holds nothing else. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signo) {
  (void)signo;
  _exit(0);
}

static void on_child(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) {
    pause();
  }
}
