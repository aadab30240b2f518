//! [`check_nesting`]: a linear pass over YAML or JSON text that refuses
//! documents nested deeper than [`MAX_NESTING`] *before* a parser sees them.
//!
//! Why: the YAML parser's work grows with the length times the depth of
//! nesting (its simple-key bookkeeping walks every open level), and its
//! depth limit (128) is checked only after the whole document is parsed, so
//! 16,000 `[` cost seconds and 64,000 `{a: ` half a minute. JSON parsing
//! stops at 128 by itself, but JSON is also read as YAML here.
//!
//! The pass estimates depth from flow brackets (outside quoted scalars and
//! comments), block indentation and compact `- ` / `? ` indicators, skipping
//! block scalar bodies. The estimate can be off by a level or two either
//! way; it only has to stop input the parser would refuse anyway, and no
//! Kubernetes object or topoalign document nests beyond a few dozen levels.
//!
//! [`prepare`] is the first step of every reader of YAML or JSON text: it
//! also drops a UTF-8 byte order mark, which editors on Windows write and
//! which would otherwise make a JSON document look like YAML.
//!
//! Owns: the bound and the estimate. Must not touch: parsing itself.

/// The deepest nesting accepted: the YAML and JSON parsers' own limit.
pub const MAX_NESTING: usize = 128;

/// Text nested deeper than [`MAX_NESTING`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: nested more than {MAX_NESTING} levels deep; refused before parsing")]
pub struct NestingError {
    /// 1-based line where the limit was passed.
    pub line: usize,
}

/// The text without a leading UTF-8 byte order mark, checked by
/// [`check_nesting`]: what every YAML or JSON reader should parse.
///
/// # Errors
/// [`NestingError`] as [`check_nesting`].
pub fn prepare(text: &str) -> Result<&str, NestingError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_nesting(text)?;
    Ok(text)
}

/// Refuses YAML or JSON text nested deeper than [`MAX_NESTING`], in time
/// linear in its length.
///
/// # Errors
/// [`NestingError`] naming the line where the limit is passed.
pub fn check_nesting(text: &str) -> Result<(), NestingError> {
    let mut scan = Scan::default();
    for (index, line) in text.lines().enumerate() {
        scan.line(line).map_err(|()| NestingError { line: index + 1 })?;
    }
    Ok(())
}

#[derive(Default)]
struct Scan {
    /// Indentation of the open block collections.
    indents: Vec<usize>,
    /// Open flow collections (`[`, `{`).
    flow: usize,
    /// Block depth where the open flow collection started.
    flow_base: usize,
    /// Inside a quoted scalar that continues on the next line.
    quote: Option<u8>,
    /// Indentation of the line that opened a block scalar (`|`, `>`): more
    /// indented lines are its text.
    block_scalar: Option<usize>,
}

impl Scan {
    fn line(&mut self, line: &str) -> Result<(), ()> {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        let rest = &bytes[indent..];
        let mut at = indent;
        if self.quote.is_none() && self.flow == 0 {
            if rest.is_empty() || rest[0] == b'#' {
                return Ok(());
            }
            if let Some(opened) = self.block_scalar {
                if indent > opened {
                    return Ok(());
                }
                self.block_scalar = None;
            }
            while self.indents.last().is_some_and(|&i| i >= indent) {
                self.indents.pop();
            }
            self.indents.push(indent);
            // Compact nested sequences and keys: `- - - x`, `? - x`.
            let mut compact = 0;
            while at + 1 < bytes.len() && matches!(bytes[at], b'-' | b'?') && bytes[at + 1] == b' ' {
                compact += 1;
                at += 2;
                while bytes.get(at) == Some(&b' ') {
                    at += 1;
                }
            }
            self.flow_base = self.indents.len() + compact;
            if self.flow_base > MAX_NESTING {
                return Err(());
            }
        }
        let start = at;
        let mut previous: Option<u8> = None; // last non-space byte outside quotes
        let mut i = at;
        while i < bytes.len() {
            let b = bytes[i];
            match self.quote {
                Some(b'"') => match b {
                    b'\\' => i += 1,
                    b'"' => self.quote = None,
                    _ => {}
                },
                Some(_) => {
                    if b == b'\'' {
                        if bytes.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            self.quote = None;
                        }
                    }
                }
                None => {
                    let after_space = i == start || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t';
                    let may_open = previous.is_none_or(|p| b"[{,:-?".contains(&p));
                    match b {
                        b'#' if after_space => break,
                        b'"' | b'\'' if may_open => self.quote = Some(b),
                        b'[' | b'{' if may_open => {
                            self.flow += 1;
                            if self.flow_base + self.flow > MAX_NESTING {
                                return Err(());
                            }
                        }
                        b']' | b'}' if self.flow > 0 => self.flow -= 1,
                        _ => {}
                    }
                    if b != b' ' && b != b'\t' {
                        previous = Some(b);
                    }
                }
            }
            i += 1;
        }
        if self.quote.is_none() && self.flow == 0 {
            let content = line[..comment_start(line)].trim_end();
            let indicator = content.trim_end_matches(|c: char| c == '-' || c == '+' || c.is_ascii_digit());
            if (indicator.ends_with(" |") || indicator.ends_with(" >") || indicator == "|" || indicator == ">")
                && indicator.len() + 2 >= content.len()
            {
                self.block_scalar = Some(indent);
            }
        }
        Ok(())
    }
}

/// Where a ` #` comment starts in a line (its length when there is none);
/// approximate inside quotes, which only matters for block scalar detection.
fn comment_start(line: &str) -> usize {
    line.find(" #").unwrap_or(line.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_documents_pass() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a # a comment with [[[[\nspec:\n  containers:\n  - name: app\n    command: [\"sh\", \"-c\", \"echo '[[[['\"]\n    resources:\n      limits: {cpu: \"2\", memory: 1Gi}\n  - name: b\n    args:\n    - |\n      {{{{{{{{{{{{\n      [[[[[[[[[[\n";
        check_nesting(pod).unwrap();
        check_nesting("{\"a\": [[1, 2], {\"b\": \"]]]]\"}]}").unwrap();
        let deep_but_fine = format!("{}1{}", "[".repeat(MAX_NESTING - 1), "]".repeat(MAX_NESTING - 1));
        check_nesting(&deep_but_fine).unwrap();
    }

    #[test]
    fn deep_flow_block_and_compact_nesting_fail_at_the_line() {
        let flow = "[".repeat(100_000);
        assert_eq!(check_nesting(&flow), Err(NestingError { line: 1 }));
        let maps = format!("a: 1\n{}", "{a: ".repeat(100_000));
        assert_eq!(check_nesting(&maps), Err(NestingError { line: 2 }));
        let compact = format!("{}x", "- ".repeat(10_000));
        assert!(check_nesting(&compact).is_err());
        let block: String = (0..200).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
        assert_eq!(check_nesting(&block), Err(NestingError { line: MAX_NESTING + 1 }));
        let split_lines = "[\n".repeat(1000);
        assert!(check_nesting(&split_lines).is_err());
    }

    #[test]
    fn quotes_cannot_hide_nesting_after_a_plain_apostrophe() {
        // `it's` is a plain scalar: its apostrophe opens no quote.
        let text = format!("a: it's\nb: {}", "[".repeat(1000));
        assert!(check_nesting(&text).is_err());
    }
}
