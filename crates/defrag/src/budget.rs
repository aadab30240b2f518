//! PodDisruptionBudgets as the planner needs them: which pods a budget
//! covers (its namespace and label selector) and how many of them may be
//! evicted now.
//!
//! The number allowed is the budget's `status.disruptionsAllowed` when the
//! object has one (a live cluster's disruption controller wrote it);
//! otherwise it is worked out as that controller does, with every matching
//! pod counted as expected and every matching running pod as healthy:
//! `minAvailable` N (or N% of expected, rounded up) → healthy − N;
//! `maxUnavailable` N (or N%, rounded up) → healthy − (expected − N);
//! never below 0. A budget with neither requires nothing (all healthy
//! pods may go).
//!
//! Owns: selectors and allowed disruptions. Must not touch: evictions.

use std::collections::BTreeMap;

use serde_json::Value;

/// A field of a budget or selector that cannot be read: where (`path`,
/// e.g. `disruptionBudgets[0].spec.minAvailable`) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct BudgetError {
    pub path: String,
    pub message: String,
}

fn error(path: impl Into<String>, message: impl Into<String>) -> BudgetError {
    BudgetError {
        path: path.into(),
        message: message.into(),
    }
}

/// A `metav1.LabelSelector`: `matchLabels` and `matchExpressions`
/// (`In`, `NotIn`, `Exists`, `DoesNotExist`), all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    /// Reads a selector; `path` names it in errors.
    ///
    /// # Errors
    /// [`BudgetError`] naming the field.
    pub fn from_value(value: &Value, path: &str) -> Result<Selector, BudgetError> {
        let mut selector = Selector::default();
        if value.is_null() {
            return Ok(selector);
        }
        let map = value.as_object().ok_or_else(|| error(path, "expected a mapping"))?;
        if let Some(labels) = map.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels
                .as_object()
                .ok_or_else(|| error(format!("{path}.matchLabels"), "expected a mapping"))?;
            for (key, value) in labels {
                let value = value
                    .as_str()
                    .ok_or_else(|| error(format!("{path}.matchLabels.{key}"), "expected a string"))?;
                selector.match_labels.insert(key.clone(), value.to_owned());
            }
        }
        if let Some(expressions) = map.get("matchExpressions").filter(|v| !v.is_null()) {
            let list = expressions
                .as_array()
                .ok_or_else(|| error(format!("{path}.matchExpressions"), "expected a list"))?;
            for (i, entry) in list.iter().enumerate() {
                let at = format!("{path}.matchExpressions[{i}]");
                let key = entry
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| error(format!("{at}.key"), "expected a string"))?;
                let operator = match entry.get("operator").and_then(Value::as_str) {
                    Some("In") => Operator::In,
                    Some("NotIn") => Operator::NotIn,
                    Some("Exists") => Operator::Exists,
                    Some("DoesNotExist") => Operator::DoesNotExist,
                    other => {
                        return Err(error(
                            format!("{at}.operator"),
                            format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                        ));
                    }
                };
                let values = match entry.get("values") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(values)) => values
                        .iter()
                        .map(|v| v.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| error(format!("{at}.values"), "expected a list of strings"))?,
                    Some(_) => return Err(error(format!("{at}.values"), "expected a list of strings")),
                };
                selector.match_expressions.push(Requirement {
                    key: key.to_owned(),
                    operator,
                    values,
                });
            }
        }
        Ok(selector)
    }

    /// Whether `labels` satisfy every requirement (an empty selector
    /// matches every pod, as a policy/v1 budget's does).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    Operator::In => value.is_some_and(|v| r.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }
}

/// `minAvailable` or `maxUnavailable`: a count or a percentage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

impl IntOrPercent {
    fn from_value(value: &Value, path: &str) -> Result<IntOrPercent, BudgetError> {
        match value {
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(IntOrPercent::Int)
                .ok_or_else(|| error(path, format!("{n} is not a non-negative count"))),
            Value::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<u32>().ok())
                .filter(|&p| p <= 100)
                .map(IntOrPercent::Percent)
                .ok_or_else(|| {
                    error(
                        path,
                        format!("{s:?} is neither a count nor a percentage from 0% to 100%"),
                    )
                }),
            other => Err(error(path, format!("expected a count or a percentage, found {other}"))),
        }
    }

    /// The amount out of `expected`, percentages rounded up (the
    /// disruption controller's `GetScaledValueFromIntOrPercent(…, true)`).
    fn of(self, expected: u32) -> u32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => (u64::from(p) * u64::from(expected)).div_ceil(100) as u32,
        }
    }
}

/// A PodDisruptionBudget as read from its manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetSpec {
    pub namespace: String,
    pub name: String,
    pub selector: Selector,
    pub min_available: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
    /// `status.disruptionsAllowed`, when the object carries it.
    pub status_allowed: Option<u32>,
}

impl BudgetSpec {
    /// Reads a `policy/v1` PodDisruptionBudget manifest; `path` names it in
    /// errors.
    ///
    /// # Errors
    /// [`BudgetError`] naming the field.
    pub fn from_manifest(manifest: &Value, path: &str) -> Result<BudgetSpec, BudgetError> {
        if let Some(kind) = manifest.get("kind").and_then(Value::as_str)
            && kind != "PodDisruptionBudget"
        {
            return Err(error(
                format!("{path}.kind"),
                format!("{kind:?}, expected PodDisruptionBudget"),
            ));
        }
        let metadata = manifest.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| error(format!("{path}.metadata.name"), "missing"))?;
        let namespace = metadata
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let spec = manifest.get("spec").cloned().unwrap_or(Value::Null);
        let selector = Selector::from_value(
            spec.get("selector").unwrap_or(&Value::Null),
            &format!("{path}.spec.selector"),
        )?;
        let amount = |field: &str| {
            spec.get(field)
                .filter(|v| !v.is_null())
                .map(|v| IntOrPercent::from_value(v, &format!("{path}.spec.{field}")))
                .transpose()
        };
        let min_available = amount("minAvailable")?;
        let max_unavailable = amount("maxUnavailable")?;
        if min_available.is_some() && max_unavailable.is_some() {
            return Err(error(
                format!("{path}.spec"),
                "minAvailable and maxUnavailable cannot both be set",
            ));
        }
        let status_allowed = match manifest.get("status").and_then(|s| s.get("disruptionsAllowed")) {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX))
                    .ok_or_else(|| error(format!("{path}.status.disruptionsAllowed"), "expected an integer"))?,
            ),
        };
        Ok(BudgetSpec {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            selector,
            min_available,
            max_unavailable,
            status_allowed,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the budget covers a pod of `namespace` with `labels`.
    pub fn covers(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        namespace == self.namespace && self.selector.matches(labels)
    }

    /// Evictions allowed now, with `expected` pods covered and `healthy`
    /// of them running (see the module docs).
    pub fn allowed(&self, expected: u32, healthy: u32) -> u32 {
        if let Some(allowed) = self.status_allowed {
            return allowed;
        }
        let desired = match (self.min_available, self.max_unavailable) {
            (Some(min), _) => min.of(expected),
            (None, Some(max)) => expected.saturating_sub(max.of(expected)),
            (None, None) => 0,
        };
        healthy.saturating_sub(desired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let selector = Selector::from_value(
            &json!({"matchLabels": {"app": "db"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}]}),
            "s",
        )
        .unwrap();
        assert!(selector.matches(&labels(&[("app", "db"), ("tier", "a")])));
        assert!(!selector.matches(&labels(&[("app", "db"), ("tier", "c")])));
        assert!(!selector.matches(&labels(&[("app", "db"), ("tier", "a"), ("canary", "1")])));
        assert!(!selector.matches(&labels(&[("tier", "a")])));
        assert!(
            Selector::default().matches(&labels(&[])),
            "the empty selector matches all"
        );
        let error = Selector::from_value(
            &json!({"matchExpressions": [{"key": "k", "operator": "Like"}]}),
            "spec.selector",
        )
        .unwrap_err();
        assert_eq!(error.path, "spec.selector.matchExpressions[0].operator", "{error}");
    }

    /// Each row: (spec, expected, healthy, allowed) — the disruption
    /// controller's arithmetic worked by hand.
    #[test]
    fn allowed_disruptions_follow_the_controller_arithmetic() {
        let rows = [
            (json!({"minAvailable": 2}), 3, 3, 1),
            (json!({"minAvailable": 3}), 3, 3, 0),
            (json!({"minAvailable": 3}), 3, 2, 0),
            (json!({"minAvailable": "50%"}), 3, 3, 1), // 50% of 3 rounds up to 2
            (json!({"maxUnavailable": 1}), 4, 4, 1),
            (json!({"maxUnavailable": 1}), 4, 3, 0),
            (json!({"maxUnavailable": "50%"}), 4, 4, 2),
            (json!({"maxUnavailable": "34%"}), 3, 3, 2), // 34% of 3 rounds up to 2
            (json!({}), 2, 2, 2),
        ];
        for (spec, expected, healthy, allowed) in rows {
            let budget =
                BudgetSpec::from_manifest(&json!({"metadata": {"name": "b"}, "spec": spec.clone()}), "b").unwrap();
            assert_eq!(
                budget.allowed(expected, healthy),
                allowed,
                "{spec} with {expected} expected, {healthy} healthy"
            );
        }
        let given = BudgetSpec::from_manifest(
            &json!({"metadata": {"name": "b"}, "spec": {"minAvailable": 0}, "status": {"disruptionsAllowed": 0}}),
            "b",
        )
        .unwrap();
        assert_eq!(
            given.allowed(5, 5),
            0,
            "the status, when present, is the controller's answer"
        );
    }

    #[test]
    fn budget_errors_name_the_field() {
        let error = BudgetSpec::from_manifest(
            &json!({"metadata": {"name": "b"}, "spec": {"minAvailable": "120%"}}),
            "disruptionBudgets[0]",
        )
        .unwrap_err();
        assert_eq!(error.path, "disruptionBudgets[0].spec.minAvailable", "{error}");
        let error = BudgetSpec::from_manifest(&json!({"spec": {}}), "disruptionBudgets[1]").unwrap_err();
        assert_eq!(error.to_string(), "disruptionBudgets[1].metadata.name: missing");
    }
}
