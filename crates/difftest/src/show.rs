//! Both answers side by side: the oracle's pretty-printed document on the
//! left, the engine's on the right, lines matched by a longest common
//! subsequence, differing lines marked.

use serde_json::Value;

/// Width of one column.
const COLUMN: usize = 64;

/// Two JSON documents in two columns; `|` marks a line that differs,
/// `<` one only the oracle has, `>` one only the engine has.
pub fn side_by_side(oracle: &Value, engine: &Value) -> String {
    let left = pretty_lines(oracle);
    let right = pretty_lines(engine);
    let mut out = format!("{:<COLUMN$}   {}\n", "oracle (the kubelet)", "engine (topoalign)");
    out.push_str(&format!("{:-<COLUMN$}   {:-<COLUMN$}\n", "", ""));
    for row in align(&left, &right) {
        let (l, r, mark) = match row {
            Row::Both(l, r) => (l, r, ' '),
            Row::Changed(l, r) => (l, r, '|'),
            Row::Left(l) => (l, "", '<'),
            Row::Right(r) => ("", r, '>'),
        };
        for (i, (lc, rc)) in chunks(l).zip_longest(chunks(r)).enumerate() {
            let m = if i == 0 { mark } else { ' ' };
            out.push_str(&format!("{lc:<COLUMN$} {m} {rc}\n"));
        }
    }
    out
}

fn pretty_lines(v: &Value) -> Vec<String> {
    // Each result on one line: the documents are long, the events short.
    let mut lines = Vec::new();
    match v {
        Value::Object(map) => {
            lines.push("{".to_owned());
            // The events first, then the final state.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(key, _)| *key != "results");
            for (key, value) in entries {
                match value.as_array() {
                    Some(items) if key == "results" => {
                        lines.push(format!("  \"{key}\": ["));
                        for item in items {
                            lines.push(format!("    {item}"));
                        }
                        lines.push("  ]".to_owned());
                    }
                    _ => match value.as_object() {
                        Some(inner) => {
                            lines.push(format!("  \"{key}\": {{"));
                            for (k, v) in inner {
                                lines.push(format!("    \"{k}\": {v}"));
                            }
                            lines.push("  }".to_owned());
                        }
                        None => lines.push(format!("  \"{key}\": {value}")),
                    },
                }
            }
            lines.push("}".to_owned());
        }
        other => lines.push(other.to_string()),
    }
    lines
}

enum Row<'a> {
    Both(&'a str, &'a str),
    Changed(&'a str, &'a str),
    Left(&'a str),
    Right(&'a str),
}

/// Lines of `a` and `b` aligned by a longest common subsequence; runs of
/// unmatched lines on both sides are paired as changed lines.
fn align<'a>(a: &'a [String], b: &'a [String]) -> Vec<Row<'a>> {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut rows = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut left: Vec<&str> = Vec::new();
    let mut right: Vec<&str> = Vec::new();
    let flush = |rows: &mut Vec<Row<'a>>, left: &mut Vec<&'a str>, right: &mut Vec<&'a str>| {
        let pairs = left.len().max(right.len());
        for k in 0..pairs {
            rows.push(match (left.get(k), right.get(k)) {
                (Some(l), Some(r)) => Row::Changed(l, r),
                (Some(l), None) => Row::Left(l),
                (None, Some(r)) => Row::Right(r),
                (None, None) => unreachable!("k < max of the lengths"),
            });
        }
        left.clear();
        right.clear();
    };
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            flush(&mut rows, &mut left, &mut right);
            rows.push(Row::Both(&a[i], &b[j]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            right.push(&b[j]);
            j += 1;
        } else {
            left.push(&a[i]);
            i += 1;
        }
    }
    flush(&mut rows, &mut left, &mut right);
    rows
}

/// A line cut into column-wide pieces (at least one, maybe empty).
fn chunks(line: &str) -> impl Iterator<Item = String> + '_ {
    let chars: Vec<char> = line.chars().collect();
    let count = chars.len().div_ceil(COLUMN).max(1);
    (0..count).map(move |k| chars.iter().skip(k * COLUMN).take(COLUMN).collect())
}

/// `zip` that runs to the longer side, padding with empty strings.
trait ZipLongest: Iterator<Item = String> + Sized {
    fn zip_longest<B: Iterator<Item = String>>(self, other: B) -> impl Iterator<Item = (String, String)> {
        let mut a = self.fuse();
        let mut b = other.fuse();
        std::iter::from_fn(move || match (a.next(), b.next()) {
            (None, None) => None,
            (x, y) => Some((x.unwrap_or_default(), y.unwrap_or_default())),
        })
    }
}

impl<I: Iterator<Item = String>> ZipLongest for I {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn differing_lines_are_marked() {
        let oracle = json!({"results": [{"event": 0, "cpus": "1-2"}, {"event": 1}], "final": {"defaultCpuSet": "0,3"}});
        let engine = json!({"results": [{"event": 0, "cpus": "2-3"}, {"event": 1}], "final": {"defaultCpuSet": "0-1"}});
        let text = side_by_side(&oracle, &engine);
        let marked: Vec<&str> = text
            .lines()
            .filter(|l| l.get(COLUMN + 1..COLUMN + 2) == Some("|"))
            .collect();
        assert_eq!(marked.len(), 2, "{text}");
        assert!(marked[0].contains("\"1-2\"") && marked[0].contains("\"2-3\""));
        assert!(marked[1].contains("defaultCpuSet"));
        let same = text.lines().filter(|l| l.contains("\"event\":1")).count();
        assert_eq!(same, 1, "{text}");
    }
}
