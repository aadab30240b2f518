//! Go's `spew` printing of the checkpoint structs, as the kubelet's
//! `hashutil.DeepHashObject` writes them into the checksum hash: `%#v` with
//! sorted map keys and methods disabled. Only the shapes the checkpoints
//! use are needed:
//!
//! - the top-level pointer prints `(*state.Type)` then the struct;
//! - a struct prints `{Field:(type)value Field:(type)value}` — every field
//!   with its type, because fields are not "already typed";
//! - a map prints `map[k:v k:v]` in sorted key order, and a slice `[a b]`;
//!   their keys and elements carry no type;
//! - a pointer inside a map prints `<*>` then its value, a nil one `<nil>`;
//!   a nil map or slice prints `<nil>`; strings print unquoted.

use std::fmt::Write;

use super::print::Print;

/// FNV-32a, Go's `hash/fnv.New32a`.
pub fn fnv32a(bytes: &[u8]) -> u32 {
    fnv32a_more(0x811c_9dc5, bytes)
}

/// FNV-32a of what gave `hash`, followed by `bytes`.
pub(crate) fn fnv32a_more(hash: u32, bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(hash, |hash, &byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

/// A spew printing being built.
#[derive(Default)]
pub(crate) struct Spew(String);

impl Spew {
    /// The printing so far.
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    pub(crate) fn raw(&mut self, text: &str) -> &mut Self {
        self.0.push_str(text);
        self
    }

    /// `Name:(type)` before a struct field's value.
    pub(crate) fn field(&mut self, name: &str, type_name: &str) -> &mut Self {
        if !self.0.ends_with('{') {
            self.0.push(' ');
        }
        let _ = write!(self.0, "{name}:({type_name})");
        self
    }

    pub(crate) fn display(&mut self, value: impl std::fmt::Display) -> &mut Self {
        let _ = write!(self.0, "{value}");
        self
    }

    /// A map or nil map: `map[` entries `]`, each entry printed by `entry`.
    pub(crate) fn map<K, V>(
        &mut self,
        entries: Option<impl IntoIterator<Item = (K, V)>>,
        mut entry: impl FnMut(&mut Spew, K, V),
    ) -> &mut Self {
        self.list(entries, "map[", "]", |s, (key, value)| entry(s, key, value))
    }

    /// A slice or nil slice.
    pub(crate) fn slice<T>(
        &mut self,
        items: Option<impl IntoIterator<Item = T>>,
        item: impl FnMut(&mut Spew, T),
    ) -> &mut Self {
        self.list(items, "[", "]", item)
    }
}

impl Print for Spew {
    const NIL: &'static str = "<nil>";
    const SEPARATOR: &'static str = " ";

    fn push(&mut self, text: &str) {
        self.0.push_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32a_matches_go() {
        // Go: fnv.New32a() over "" and "a".
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a_more(fnv32a(b"(str"), b"ing)a"), fnv32a(b"(string)a"));
    }
}
