//! Generates a synthetic corpus: `cargo run -p covmerge-corpus --example gen -- OUT [--seed N ...]`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use covmerge_corpus::{generate, CorpusSpec};

#[derive(Parser)]
#[command(about = "Generate a deterministic synthetic syzkaller coverage corpus")]
struct Cli {
    /// Output directory.
    out: PathBuf,
    #[command(flatten)]
    spec: CorpusSpec,
}

fn main() {
    let cli = Cli::parse();
    let t = Instant::now();
    match generate(&cli.spec, &cli.out) {
        Ok(c) => {
            println!("base_commit {}", c.base_commit);
            println!("rows {}", c.rows);
            println!("inputs {}", c.inputs.len());
            println!("elapsed {:.2}s", t.elapsed().as_secs_f64());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
