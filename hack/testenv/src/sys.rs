//! The few operating-system calls std does not offer: parent-death signals,
//! sessions, signals by PID, an exit hook, and process identity from /proc.
//!
//! This is the only module of the crate with `unsafe`; every block is one libc
//! call with its reasoning next to it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// A process identified by PID *and* start time, so a PID reused by an
/// unrelated process after ours died is never mistaken for ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessId {
    pub pid: u32,
    /// Field 22 of /proc/<pid>/stat (clock ticks after boot).
    pub start_time: u64,
}

impl ProcessId {
    /// The identity of a running process, or `None` if it is gone.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = ProcStat::read(pid)?;
        Some(Self {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The current process.
    pub fn current() -> Option<Self> {
        Self::of(std::process::id())
    }

    /// Whether this very process still runs (zombies count as gone: they
    /// only wait for their parent to collect the exit status).
    pub fn is_alive(&self) -> bool {
        ProcStat::read(self.pid)
            .is_some_and(|stat| stat.start_time == self.start_time && stat.state != 'Z')
    }

    /// Whether the process table has no trace of it any more (not even a
    /// zombie waiting for its parent to collect it).
    pub fn is_reaped(&self) -> bool {
        ProcStat::read(self.pid).is_none_or(|stat| stat.start_time != self.start_time)
    }

    /// Sends `signal` if the process is still this one.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        if !self.is_alive() {
            return Ok(());
        }
        let pid = libc::pid_t::try_from(self.pid).map_err(io::Error::other)?;
        #[allow(unsafe_code)]
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        let rc = unsafe { libc::kill(pid, signal.number()) };
        if rc == 0 {
            Ok(())
        } else {
            let err = io::Error::last_os_error();
            // Gone between the check and the signal: that is what we wanted.
            if err.raw_os_error() == Some(libc::ESRCH) {
                Ok(())
            } else {
                Err(err)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Signal {
    Term,
    Kill,
    /// Freezes the process until SIGCONT (or SIGKILL): tests use it to
    /// stop a process at an exact moment, e.g. with a request in flight.
    Stop,
    /// Resumes a process frozen with [`Signal::Stop`].
    Cont,
}

impl Signal {
    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        }
    }
}

struct ProcStat {
    state: char,
    start_time: u64,
}

impl ProcStat {
    fn read(pid: u32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Self::parse(&text)
    }

    /// `pid (comm) state ppid ...`: comm may contain spaces and parentheses,
    /// so fields are counted after the *last* `)`.
    fn parse(text: &str) -> Option<Self> {
        let rest = &text[text.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        // After the state (field 3) the start time is field 22, 19 further on.
        let start_time = fields.nth(18)?.parse().ok()?;
        Some(Self { state, start_time })
    }
}

/// Makes the child receive SIGKILL when the *thread* that spawns it ends
/// (which, for a thread that lives as long as the process, means when the
/// process ends in any way, SIGKILL included). Linux only.
pub fn die_with_spawning_thread(command: &mut Command) {
    let parent = std::process::id();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec. It calls only
    // async-signal-safe functions (prctl, getppid) and builds errors from raw
    // OS codes, which does not allocate.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then no
            // signal will ever come, so give up instead of living on.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Starts the child in a session of its own, so it outlives the launcher and
/// neither Ctrl-C in the launcher's terminal nor closing it reaches it.
pub fn detach(command: &mut Command) {
    #[allow(unsafe_code)]
    // SAFETY: runs in the forked child before exec; setsid(2) is
    // async-signal-safe and the error path does not allocate.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
    }
}

/// Registers `hook` to run when the process exits normally (returning from
/// `main` or `std::process::exit`, which is how test binaries end, failed
/// or not). Rust never drops statics, so this is the only place to clean up
/// what a process-wide static started.
pub fn at_exit(hook: extern "C" fn()) -> io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: atexit(3) stores a function pointer with 'static lifetime.
    let rc = unsafe { libc::atexit(hook) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::other("atexit refused the hook"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_names() {
        let mut fields = vec!["S".to_owned()];
        fields.extend((4..=21).map(|n| n.to_string()));
        fields.push("987654".to_owned());
        fields.push("23".to_owned());
        let text = format!("42 (a) b (c)) {}", fields.join(" "));
        let stat = ProcStat::parse(&text).expect("well-formed stat line");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.start_time, 987_654);
    }

    #[test]
    fn a_stopped_process_is_frozen_until_killed() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let id = ProcessId::of(child.id()).expect("it runs");
        id.signal(Signal::Stop).expect("SIGSTOP is delivered");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ProcStat::read(id.pid).map(|s| s.state) != Some('T') {
            assert!(std::time::Instant::now() < deadline, "not stopped");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        id.signal(Signal::Kill).expect("SIGKILL is delivered");
        child.wait().expect("collected");
        assert!(!id.is_alive());
    }

    #[test]
    fn the_current_process_is_alive_and_a_different_start_time_is_not() {
        let me = ProcessId::current().expect("/proc is mounted");
        assert!(me.is_alive());
        let impostor = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.is_alive());
    }
}
