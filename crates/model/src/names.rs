//! The kubelet's words for its choices — policy, scope and option names —
//! spelled once. [`kubelet_vocabulary!`] declares an enum together with its
//! KubeletConfiguration spelling: `as_str`, `FromStr` (refusing any other
//! text with [`UnknownName`]), `Display`, and `ALL`/`NAMES` in the order the
//! kubelet lists them (for command-line choices and error texts).
//!
//! Owns: the mapping between a name and its variant. Must not touch: what
//! a name means (the manager crates decide that) or which names a kubelet
//! release accepts (its validation does).

/// A name that is not one of an enum's spellings; Display lists those that
/// are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}: use {}", one_of(.known))]
pub struct UnknownName {
    /// What the name names, e.g. `topology manager policy`.
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// Every spelling accepted.
    pub known: &'static [&'static str],
}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// Declares a `Copy` enum whose variants are spelled as the kubelet spells
/// them:
///
/// ```
/// topoalign_model::kubelet_vocabulary! {
///     /// `topologyManagerScope`.
///     pub enum Scope("topology manager scope") {
///         /// One merge per container.
///         Container = "container",
///         Pod = "pod",
///     }
/// }
/// assert_eq!("pod".parse::<Scope>(), Ok(Scope::Pod));
/// assert_eq!(Scope::Container.to_string(), "container");
/// assert_eq!(Scope::NAMES, ["container", "pod"]);
/// assert_eq!(
///     "Pod".parse::<Scope>().unwrap_err().to_string(),
///     r#"unknown topology manager scope "Pod": use container or pod"#
/// );
/// ```
#[macro_export]
macro_rules! kubelet_vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant ),+
        }

        impl $name {
            /// Every variant, in the order the kubelet lists them.
            pub const ALL: &'static [$name] = &[ $( $name::$variant ),+ ];
            /// Every spelling, in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[ $( $text ),+ ];

            /// The KubeletConfiguration spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $( $text => Ok($name::$variant), )+
                    _ => Err($crate::UnknownName {
                        what: $what,
                        given: text.to_owned(),
                        known: $name::NAMES,
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    kubelet_vocabulary! {
        enum Colour("colour") { Red = "red", DeepBlue = "deep-blue", Green = "green" }
    }

    #[test]
    fn every_name_parses_back_to_its_variant() {
        for (variant, name) in Colour::ALL.iter().zip(Colour::NAMES) {
            assert_eq!(variant.as_str(), *name);
            assert_eq!(name.parse::<Colour>(), Ok(*variant));
            assert_eq!(variant.to_string(), *name);
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let error = "Deep-Blue".parse::<Colour>().unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"unknown colour "Deep-Blue": use red, deep-blue or green"#
        );
        assert_eq!(super::one_of(&["a"]), "a");
    }
}
