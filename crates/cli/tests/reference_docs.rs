//! docs/reference/ is the binary's own `--help`, one page per command and
//! an index: this test renders the pages again, in memory, from the built
//! binary and fails, naming every page that differs, when a help text
//! changed without its page.
//!
//! To bring docs/reference/ up to date after changing a help text:
//!
//! ```sh
//! TOPOALIGN_UPDATE_DOCS=1 cargo test -p topoalign --test reference_docs
//! ```
//!
//! The help is rendered at 100 columns (`COLUMNS=100`, no terminal: the
//! binary caps its help at 100 columns anyway, `max_term_width`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable that makes this test write the pages instead
/// of comparing them.
const UPDATE: &str = "TOPOALIGN_UPDATE_DOCS";

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_topoalign"))
}

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// `topoalign ARGS --help` as a person with a 100-column terminal sees it.
fn help(args: &[&str]) -> String {
    let output = Command::new(binary())
        .args(args)
        .arg("--help")
        .env("COLUMNS", "100")
        .env_remove("LINES")
        .stdin(Stdio::null())
        .output()
        .expect("run topoalign");
    let text = String::from_utf8(output.stdout).expect("help is UTF-8");
    // clap indents the blank line before `[possible values: ...]`; a page
    // keeps no trailing blanks.
    let text: String = text.lines().map(|line| line.trim_end().to_owned() + "\n").collect();
    assert!(
        output.status.success(),
        "topoalign {} --help failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

/// The commands `topoalign --help` lists (hidden ones are not listed), in
/// its order, without `help`.
fn commands(top: &str) -> Vec<String> {
    let section = top
        .split_once("\nCommands:\n")
        .map(|(_, rest)| rest)
        .expect("topoalign --help has a Commands: section");
    section
        .lines()
        .take_while(|line| !line.is_empty())
        // A command's line starts with two spaces and its name; a
        // description wrapped onto more lines is indented further.
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// A help's first paragraph (its about text), on one line.
fn about(help: &str) -> String {
    let paragraph = help.split("\n\n").next().unwrap_or_default();
    paragraph.split_whitespace().collect::<Vec<_>>().join(" ")
}

const GENERATED: &str = "<!-- Generated from the binary's --help by crates/cli/tests/reference_docs.rs;\n     \
     do not edit: change the help text, then run\n     \
     TOPOALIGN_UPDATE_DOCS=1 cargo test -p topoalign --test reference_docs -->\n";

/// Every page of docs/reference/, by file name.
fn render() -> BTreeMap<String, String> {
    let top = help(&[]);
    let names = commands(&top);
    assert!(
        names.len() >= 10,
        "expected topoalign's commands in its --help, found {names:?} in:\n{top}"
    );
    let mut pages = BTreeMap::new();
    let mut index = format!(
        "{GENERATED}\n# Command reference\n\n\
         Every command's `--help`, as the binary prints it. The conventions all \
         commands share (output formats, `--node`, exit status) are in \
         [../commands.md](../commands.md).\n\n\
         | command | what it does | guide |\n|---|---|---|\n"
    );
    for name in &names {
        let text = help(&[name]);
        let about = about(&text);
        // The command's own guide, where docs/ has one.
        let guide = format!("{name}.md");
        let guide = docs().join(&guide).is_file().then_some(guide);
        index.push_str(&format!(
            "| [`topoalign {name}`]({name}.md) | {} | {} |\n",
            about.replace('|', "\\|"),
            guide.as_ref().map(|g| format!("[{g}](../{g})")).unwrap_or_default()
        ));
        let mut page = format!("{GENERATED}\n# `topoalign {name}`\n\n{about}\n\n");
        match &guide {
            Some(guide) => page.push_str(&format!(
                "Guide: [docs/{guide}](../{guide}). All commands: [index](index.md).\n\n"
            )),
            None => page.push_str("All commands: [index](index.md).\n\n"),
        }
        assert!(!text.contains("```"), "topoalign {name} --help holds a code fence");
        page.push_str(&format!("```text\n$ topoalign {name} --help\n{}```\n", text));
        pages.insert(format!("{name}.md"), page);
    }
    index.push_str(&format!("\n```text\n$ topoalign --help\n{top}```\n"));
    pages.insert("index.md".to_owned(), index);
    pages
}

/// The Markdown pages now in `dir`.
fn on_disk(dir: &Path) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|entry| entry.expect("read docs/reference").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| {
            let name = path.file_name().expect("file name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, text)
        })
        .collect()
}

/// The first line where `want` and `have` differ, for the message.
fn first_difference(want: &str, have: &str) -> String {
    let mut have_lines = have.lines();
    for (number, line) in want.lines().enumerate() {
        match have_lines.next() {
            Some(old) if old == line => {}
            Some(old) => return format!("line {}: the page has {old:?}, the help gives {line:?}", number + 1),
            None => return format!("line {}: the page ends, the help gives {line:?}", number + 1),
        }
    }
    match have_lines.next() {
        Some(old) => format!("the help ends where the page goes on with {old:?}"),
        None => "line endings differ".to_owned(),
    }
}

#[test]
fn docs_reference_is_the_binarys_help() {
    let dir = docs().join("reference");
    let want = render();
    let have = on_disk(&dir);
    if std::env::var_os(UPDATE).is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).expect("create docs/reference");
        for name in have.keys().filter(|name| !want.contains_key(*name)) {
            std::fs::remove_file(dir.join(name)).expect("remove a page of no command");
        }
        for (name, text) in &want {
            if have.get(name) != Some(text) {
                std::fs::write(dir.join(name), text).expect("write docs/reference");
            }
        }
        return;
    }
    let mut problems = Vec::new();
    for (name, text) in &want {
        match have.get(name) {
            None => problems.push(format!("docs/reference/{name} is missing")),
            Some(old) if old != text => problems.push(format!(
                "docs/reference/{name} differs from the help: {}",
                first_difference(text, old)
            )),
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|name| !want.contains_key(*name)) {
        problems.push(format!("docs/reference/{name} is no command's page"));
    }
    assert!(
        problems.is_empty(),
        "docs/reference/ is not the binary's --help:\n  {}\nRegenerate it with\n  {UPDATE}=1 cargo test -p topoalign --test reference_docs\nand commit docs/reference/.",
        problems.join("\n  ")
    );
}

#[test]
fn the_command_list_is_read_from_a_wrapped_help() {
    let top = "Usage: topoalign <COMMAND>\n\nCommands:\n  replay    Play a scenario\n  admit     Would the kubelet\n            admit these pods\n  help      Print this message\n\nOptions:\n  -h, --help  Print help\n";
    assert_eq!(commands(top), ["replay", "admit"]);
    assert_eq!(
        about("Would the kubelet\nadmit these pods\n\nUsage: x"),
        "Would the kubelet admit these pods"
    );
}
