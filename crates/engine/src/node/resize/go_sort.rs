//! Go's `slices.SortFunc` (pattern-defeating quicksort, `zsortanyfunc.go`
//! of Go 1.21 to 1.26), step for step: the kubelet sorts its pending
//! resizes with a comparator that is not a strict weak order
//! (`sortPendingResizes`), so the result is whatever this algorithm makes of
//! it, and only the same algorithm gives the same order. A translation, on
//! purpose: every comparison and swap must be Go's.
//!
//! `less(a, b)` stands for Go's `cmp(a, b) < 0`.

/// Sorts `data` as Go's `slices.SortFunc(data, cmp)` does, where
/// `less(a, b)` is `cmp(a, b) < 0`.
pub(super) fn sort_func<T>(data: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let n = data.len();
    let limit = bits_len(n);
    pdqsort(data, 0, n, limit, less);
}

/// Go's `bits.Len(uint(n))`: the bits needed to write `n`.
fn bits_len(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

fn insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&data[j], &data[j - 1]) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sift_down<T>(data: &mut [T], lo: usize, hi: usize, first: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let mut root = lo;
    loop {
        let mut child = 2 * root + 1;
        if child >= hi {
            break;
        }
        if child + 1 < hi && less(&data[first + child], &data[first + child + 1]) {
            child += 1;
        }
        if !less(&data[first + root], &data[first + child]) {
            return;
        }
        data.swap(first + root, first + child);
        root = child;
    }
}

fn heap_sort<T>(data: &mut [T], a: usize, b: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    let first = a;
    let hi = b - a;
    for i in (0..=(hi.saturating_sub(1)) / 2).rev() {
        if hi == 0 {
            break;
        }
        sift_down(data, i, hi, first, less);
    }
    for i in (0..hi).rev() {
        data.swap(first, first + i);
        sift_down(data, 0, i, first, less);
    }
}

fn pdqsort<T>(data: &mut [T], mut a: usize, mut b: usize, mut limit: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    const MAX_INSERTION: usize = 12;
    let mut was_balanced = true;
    let mut was_partitioned = true;
    loop {
        let length = b - a;
        if length <= MAX_INSERTION {
            insertion_sort(data, a, b, less);
            return;
        }
        if limit == 0 {
            heap_sort(data, a, b, less);
            return;
        }
        if !was_balanced {
            break_patterns(data, a, b);
            limit -= 1;
        }
        let (mut pivot, mut hint) = choose_pivot(data, a, b, less);
        if hint == Hint::Decreasing {
            data[a..b].reverse();
            pivot = (b - 1) - (pivot - a);
            hint = Hint::Increasing;
        }
        if was_balanced && was_partitioned && hint == Hint::Increasing && partial_insertion_sort(data, a, b, less) {
            return;
        }
        if a > 0 && !less(&data[a - 1], &data[pivot]) {
            a = partition_equal(data, a, b, pivot, less);
            continue;
        }
        let (mid, already_partitioned) = partition(data, a, b, pivot, less);
        was_partitioned = already_partitioned;
        let (left_len, right_len) = (mid - a, b - mid);
        let balance_threshold = length / 8;
        if left_len < right_len {
            was_balanced = left_len >= balance_threshold;
            pdqsort(data, a, mid, limit, less);
            a = mid + 1;
        } else {
            was_balanced = right_len >= balance_threshold;
            pdqsort(data, mid + 1, b, limit, less);
            b = mid;
        }
    }
}

fn partition<T>(
    data: &mut [T],
    a: usize,
    b: usize,
    pivot: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> (usize, bool) {
    data.swap(a, pivot);
    // i and j are inclusive bounds of what is left to partition; j may
    // fall below a + 1 (to a), never below a.
    let (mut i, mut j) = (a + 1, b - 1);
    while i <= j && less(&data[i], &data[a]) {
        i += 1;
    }
    while i <= j && !less(&data[j], &data[a]) {
        j -= 1;
    }
    if i > j {
        data.swap(j, a);
        return (j, true);
    }
    data.swap(i, j);
    i += 1;
    j -= 1;
    loop {
        while i <= j && less(&data[i], &data[a]) {
            i += 1;
        }
        while i <= j && !less(&data[j], &data[a]) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    data.swap(j, a);
    (j, false)
}

fn partition_equal<T>(
    data: &mut [T],
    a: usize,
    b: usize,
    pivot: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> usize {
    data.swap(a, pivot);
    let (mut i, mut j) = (a + 1, b - 1);
    loop {
        while i <= j && !less(&data[a], &data[i]) {
            i += 1;
        }
        while i <= j && less(&data[a], &data[j]) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    i
}

fn partial_insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &mut impl FnMut(&T, &T) -> bool) -> bool {
    const MAX_STEPS: usize = 5;
    const SHORTEST_SHIFTING: usize = 50;
    let mut i = a + 1;
    for _ in 0..MAX_STEPS {
        while i < b && !less(&data[i], &data[i - 1]) {
            i += 1;
        }
        if i == b {
            return true;
        }
        if b - a < SHORTEST_SHIFTING {
            return false;
        }
        data.swap(i, i - 1);
        // Go shifts down to index 1 of the whole slice, not to a + 1.
        if i - a >= 2 {
            let mut j = i - 1;
            while j >= 1 {
                if !less(&data[j], &data[j - 1]) {
                    break;
                }
                data.swap(j, j - 1);
                j -= 1;
            }
        }
        if b - i >= 2 {
            for j in i + 1..b {
                if !less(&data[j], &data[j - 1]) {
                    break;
                }
                data.swap(j, j - 1);
            }
        }
    }
    false
}

fn break_patterns<T>(data: &mut [T], a: usize, b: usize) {
    let length = b - a;
    if length >= 8 {
        let mut random = length as u64;
        let modulus = 1usize << bits_len(length);
        let mut idx = a + (length / 4) * 2 - 1;
        while idx <= a + (length / 4) * 2 + 1 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let mut other = (random as usize) & (modulus - 1);
            if other >= length {
                other -= length;
            }
            data.swap(idx, a + other);
            idx += 1;
        }
    }
}

fn choose_pivot<T>(data: &mut [T], a: usize, b: usize, less: &mut impl FnMut(&T, &T) -> bool) -> (usize, Hint) {
    const SHORTEST_NINTHER: usize = 50;
    const MAX_SWAPS: usize = 4 * 3;
    let l = b - a;
    let mut swaps = 0;
    let mut i = a + l / 4;
    let mut j = a + l / 4 * 2;
    let mut k = a + l / 4 * 3;
    if l >= 8 {
        if l >= SHORTEST_NINTHER {
            i = median(data, i - 1, i, i + 1, &mut swaps, less);
            j = median(data, j - 1, j, j + 1, &mut swaps, less);
            k = median(data, k - 1, k, k + 1, &mut swaps, less);
        }
        j = median(data, i, j, k, &mut swaps, less);
    }
    match swaps {
        0 => (j, Hint::Increasing),
        MAX_SWAPS => (j, Hint::Decreasing),
        _ => (j, Hint::Unknown),
    }
}

fn order2<T>(
    data: &[T],
    a: usize,
    b: usize,
    swaps: &mut usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> (usize, usize) {
    if less(&data[b], &data[a]) {
        *swaps += 1;
        return (b, a);
    }
    (a, b)
}

fn median<T>(
    data: &[T],
    a: usize,
    b: usize,
    c: usize,
    swaps: &mut usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> usize {
    let (a, b) = order2(data, a, b, swaps, less);
    let (b, _c) = order2(data, b, c, swaps, less);
    let (_a, b) = order2(data, a, b, swaps, less);
    b
}

#[cfg(test)]
mod tests {
    use super::sort_func;

    /// Go 1.26: `slices.SortFunc` of 0..n reversed with `cmp.Compare`
    /// sorts; with a comparator that calls everything smaller than
    /// everything (`-1` always) the insertion sort of up to 12 elements
    /// moves each element to the front in turn, reversing the slice.
    #[test]
    fn sorts_and_reproduces_go_on_an_inconsistent_comparator() {
        for n in [0usize, 1, 5, 12, 13, 49, 50, 51, 200, 1000] {
            let mut v: Vec<usize> = (0..n).rev().collect();
            sort_func(&mut v, &mut |a, b| a < b);
            assert_eq!(v, (0..n).collect::<Vec<_>>(), "n = {n}");
            let mut w: Vec<usize> = (0..n).map(|i| (i * 7919) % 101).collect();
            let mut expected = w.clone();
            expected.sort_unstable();
            sort_func(&mut w, &mut |a, b| a < b);
            assert_eq!(w, expected, "n = {n}");
        }
        let mut v: Vec<usize> = (0..12).collect();
        sort_func(&mut v, &mut |_, _| true);
        assert_eq!(v, (0..12).rev().collect::<Vec<_>>());
    }
}
