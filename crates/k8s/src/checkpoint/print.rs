//! What Go's JSON ([`Writer`](super::go_json::Writer)) and spew
//! ([`Spew`](super::spew::Spew)) printings share: a map or slice is nil,
//! or its items between brackets, separated.

/// A printing that writes Go's maps and slices.
pub(crate) trait Print: Sized {
    /// How a nil map or slice prints (`null`, `<nil>`).
    const NIL: &'static str;
    /// What stands between two items (`,`, a space).
    const SEPARATOR: &'static str;

    fn push(&mut self, text: &str);

    /// `items` between `open` and `close`, each printed by `item`; `NIL`
    /// for `None`.
    fn list<T>(
        &mut self,
        items: Option<impl IntoIterator<Item = T>>,
        open: &str,
        close: &str,
        mut item: impl FnMut(&mut Self, T),
    ) -> &mut Self {
        let Some(items) = items else {
            self.push(Self::NIL);
            return self;
        };
        self.push(open);
        for (i, value) in items.into_iter().enumerate() {
            if i > 0 {
                self.push(Self::SEPARATOR);
            }
            item(self, value);
        }
        self.push(close);
        self
    }
}
