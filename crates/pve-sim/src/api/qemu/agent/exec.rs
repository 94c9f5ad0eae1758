//! `guest-exec` inside the simulated guest: a few commands behave like
//! their coreutils namesakes on the agent's file store (`echo`, `cat`,
//! `test -f/-e`, `hostname`, `true`, `false`, `cloud-init status`, `sh -c`);
//! every other command succeeds without output, like a provisioned guest
//! where the tools a bootstrap calls exist and work.

use crate::state::Vm;
use crate::state::guest::ExecResult;

pub fn run(vm: &Vm, argv: &[String], input: Option<&str>) -> ExecResult {
    let ok = |out: String| ExecResult {
        exitcode: 0,
        out,
        err: String::new(),
    };
    let fail = |code: i32, err: String| ExecResult {
        exitcode: code,
        out: String::new(),
        err,
    };
    let Some((cmd, args)) = argv.split_first() else {
        return ok(input.unwrap_or_default().to_owned());
    };
    let base = cmd.rsplit('/').next().unwrap_or(cmd);
    match base {
        "echo" => ok(format!("{}\n", args.join(" "))),
        "true" => ok(String::new()),
        "false" => fail(1, String::new()),
        "hostname" => ok(format!("{}\n", vm.name())),
        "cat" if args.is_empty() => ok(input.unwrap_or_default().to_owned()),
        "cat" => {
            let mut out = String::new();
            for f in args {
                match vm.guest.files.get(f) {
                    Some(data) => out.push_str(&String::from_utf8_lossy(data)),
                    None => return fail(1, format!("cat: {f}: No such file or directory\n")),
                }
            }
            ok(out)
        }
        "test" | "[" => match args {
            [flag, f, ..] if flag == "-f" || flag == "-e" => {
                if vm.guest.files.contains_key(f) {
                    ok(String::new())
                } else {
                    fail(1, String::new())
                }
            }
            _ => ok(String::new()),
        },
        "cloud-init" if args.first().is_some_and(|a| a == "status") => ok("status: done\n".into()),
        "sh" | "bash" if args.first().is_some_and(|a| a == "-c") => {
            let script = args.get(1).cloned().unwrap_or_default();
            let words: Vec<String> = script.split_whitespace().map(str::to_owned).collect();
            run(vm, &words, input)
        }
        _ => ok(String::new()),
    }
}
