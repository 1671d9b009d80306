//! Mock upstream binary: serves the three providers' wire protocols on
//! 127.0.0.1 and prints `listening on 127.0.0.1:PORT` once ready, for test
//! suites running outside cargo (`cargo run --example mock_upstream -- --port 0`).

#[allow(dead_code, unused_imports)]
#[path = "../e2e/common/mock_upstream/mod.rs"]
mod mock_upstream;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

const USAGE: &str = concat!(
    "usage: mock_upstream [--port N] [--cohere-key KEY] [--verbose]\n",
    "  --port N     port on 127.0.0.1 to listen on (0, the default: an ephemeral one)\n",
    "  --cohere-key KEY  the Bearer key Cohere rerank calls (under /cohere) must carry\n",
    "  --verbose    log one line per request on stderr",
);

/// What the command line asks: the port, the Cohere key, verbosity.
struct Args {
    port: u16,
    cohere_key: Option<String>,
    verbose: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut port = 0;
    let mut verbose = false;
    let mut cohere_key = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if let Some(key) = arg.strip_prefix("--cohere-key=") {
            cohere_key = Some(key.to_owned());
            continue;
        }
        if arg == "--cohere-key" {
            cohere_key = Some(args.next().ok_or("--cohere-key needs a value")?);
            continue;
        }
        let value = match arg.split_once('=') {
            Some(("--port", value)) => Some(value.to_owned()),
            _ if arg == "--port" => Some(args.next().ok_or("--port needs a value")?),
            _ => None,
        };
        match (arg.as_str(), value) {
            (_, Some(value)) => {
                port = value
                    .parse()
                    .map_err(|_| format!("--port: not a port number: {value:?}"))?;
            }
            ("-v" | "--verbose", None) => verbose = true,
            ("-h" | "--help", None) => return Err(String::new()),
            (other, None) => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        port,
        cohere_key,
        verbose,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let Args {
        port,
        cohere_key,
        verbose,
    } = match parse_args() {
        Ok(parsed) => parsed,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("mock_upstream: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mock =
        match mock_upstream::MockUpstream::bind(SocketAddr::from(([127, 0, 0, 1], port))).await {
            Ok(mock) => mock,
            Err(e) => {
                eprintln!("mock_upstream: cannot listen on 127.0.0.1:{port}: {e}");
                return ExitCode::FAILURE;
            }
        };
    mock.set_verbose(verbose);
    if let Some(key) = cohere_key {
        mock.expect_cohere_key(&key);
    }
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "listening on {}", mock.addr())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    // Serve until killed.
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
