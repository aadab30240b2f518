//! Go's `slices.SortFunc` (pattern-defeating quicksort, `zsortanyfunc.go`
//! of Go 1.21 to 1.26), step for step: the kubelet sorts its pending
//! resizes with a comparator that is not a strict weak order
//! (`sortPendingResizes`), so the result is whatever this algorithm makes of
//! it, and only the same algorithm gives the same order. A translation, on
//! purpose: every comparison and swap must be Go's.
//!
//! `less(a, b)` stands for Go's `cmp(a, b) < 0`.
//!
//! Translated from Go's `src/slices/zsortanyfunc.go` (Go 1.26), Copyright
//! 2022 The Go Authors, under Go's BSD-style licence, whose text is kept
//! beside this file (`LICENSE-go`).

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
    /// Go 1.26 `slices.SortFunc` with the kubelet's comparator shape
    /// (not increasing first, then priority, then time, nil last, equal
    /// times "after" each other) on pseudo-random keys "increasing,
    /// priority, time (-1: nil)": the order Go printed, by input index.
    #[test]
    fn matches_go_on_the_pending_resize_comparator() {
        let cases: [(usize, &str, &str); 4] = [
            (
                13,
                "1,0,5 0,2,3 1,1,2 1,0,1 0,0,3 1,1,3 1,0,-1 1,2,4 1,1,1 0,1,4 1,1,1 1,0,-1 0,0,0",
                "4 12 1 9 7 10 8 2 5 3 0 6 11",
            ),
            (
                40,
                "0,0,2 1,0,-1 0,1,2 1,2,2 1,2,1 1,2,4 0,0,1 1,2,0 1,1,0 1,1,4 1,2,2 0,0,3 1,2,3 1,0,1 1,0,0 1,2,5 1,1,5 0,0,0 1,2,0 1,0,0 1,2,4 1,2,0 1,1,4 0,0,2 1,1,1 1,0,2 1,2,-1 1,0,0 1,1,5 1,2,5 0,1,1 1,1,-1 0,1,5 1,1,-1 1,2,4 1,0,2 0,0,0 1,1,-1 0,0,3 1,1,5",
                "30 0 17 32 11 36 2 38 23 6 7 21 18 4 10 3 12 34 20 5 15 29 26 8 24 9 22 39 28 16 33 31 37 27 19 14 13 25 35 1",
            ),
            (
                64,
                "1,0,4 0,1,1 1,2,4 0,0,-1 0,0,-1 1,2,-1 0,0,5 1,0,1 1,2,5 1,2,0 0,1,0 1,2,5 1,0,1 1,1,3 1,0,2 0,0,0 1,0,-1 0,2,3 0,1,3 1,2,2 0,0,5 1,0,1 1,0,3 1,1,1 0,2,2 1,0,0 1,0,4 0,0,2 1,2,3 0,1,-1 0,1,-1 1,1,1 1,2,0 1,1,2 1,2,3 0,2,-1 1,2,-1 1,1,1 1,1,3 1,0,1 1,1,2 0,1,2 1,1,0 1,2,2 1,2,2 0,2,5 1,1,5 1,0,-1 0,2,4 1,0,1 0,1,5 1,2,0 1,0,-1 1,1,-1 1,0,1 1,2,-1 1,1,3 1,0,-1 1,0,5 1,0,5 1,1,0 1,1,3 1,0,0 1,1,1",
                "24 10 29 6 18 20 15 4 3 35 1 45 50 30 41 17 27 48 9 32 51 44 43 19 34 28 2 11 8 55 5 36 42 60 31 63 37 23 40 33 38 61 56 13 46 53 25 62 12 7 21 54 49 39 14 22 0 26 58 59 52 47 16 57",
            ),
            (
                200,
                "1,2,5 1,0,0 0,1,-1 0,0,-1 1,0,2 1,1,-1 1,1,-1 0,1,2 1,0,1 1,0,3 1,1,0 0,0,3 1,1,0 1,0,5 0,0,-1 0,2,0 0,0,1 0,2,2 1,0,5 1,0,2 1,1,5 1,2,5 1,0,3 1,1,0 0,0,3 1,0,3 1,1,4 1,2,-1 1,2,5 0,2,0 1,0,2 0,2,0 1,0,5 1,0,3 1,0,-1 0,2,4 1,1,-1 0,2,2 1,2,5 1,0,2 1,2,4 1,1,3 1,1,0 0,2,0 1,0,0 1,2,0 0,2,2 1,2,3 1,2,0 1,2,-1 0,0,0 1,0,1 1,0,3 1,2,5 1,0,1 1,0,2 0,1,4 1,2,-1 0,0,1 1,0,-1 0,0,3 1,0,1 0,1,5 1,1,1 1,2,4 1,2,3 1,2,2 1,1,4 1,2,3 1,0,3 1,2,1 1,1,4 1,2,3 1,2,-1 0,1,2 1,2,2 0,1,2 1,0,2 0,0,2 0,2,3 1,1,0 0,0,1 0,1,4 1,0,2 0,1,4 1,0,1 1,0,-1 0,0,2 1,0,1 1,0,2 1,0,0 1,2,4 1,0,0 1,1,3 0,1,5 1,1,1 1,1,-1 0,1,0 0,2,2 0,0,-1 1,2,4 0,1,3 1,0,3 1,2,4 0,1,-1 1,0,1 1,2,2 0,1,3 1,1,2 1,2,4 0,0,3 1,1,4 1,1,0 0,2,4 1,0,4 1,1,3 1,0,1 0,2,2 0,1,1 1,0,3 1,2,5 1,2,2 1,0,0 0,0,1 1,0,5 1,1,3 1,2,-1 1,2,3 1,0,2 1,1,3 0,0,5 1,0,0 0,2,5 1,1,-1 1,2,4 0,1,2 1,1,0 1,2,2 1,1,1 1,2,2 1,1,5 1,2,2 1,1,3 1,2,5 1,0,2 1,2,5 1,2,3 0,2,3 1,2,4 1,0,3 1,0,0 0,0,5 1,0,3 1,2,4 1,1,2 1,1,-1 0,2,2 1,1,4 1,1,1 1,1,3 1,0,3 0,0,4 1,0,-1 1,0,0 1,0,4 1,2,5 1,0,4 1,1,-1 0,1,4 1,2,0 1,0,0 1,0,1 1,2,5 0,1,4 1,0,-1 0,0,0 1,2,3 1,1,2 1,1,-1 1,0,-1 0,2,5 1,2,1 1,1,3 1,0,0 0,1,-1 1,0,0 1,1,1 1,1,-1 1,0,2 1,2,4 1,2,3 1,2,-1 1,0,0 1,1,4 1,2,5 1,2,2 1,0,0 1,1,2 1,2,3 1,0,1",
                "180 99 132 16 78 151 87 46 50 84 175 81 147 14 2 94 110 101 56 113 29 24 97 168 37 173 82 118 17 43 15 76 107 58 11 31 35 135 7 130 79 98 123 3 74 117 62 104 156 60 184 161 45 48 169 181 70 66 106 137 75 139 141 195 121 146 176 198 68 47 65 127 72 190 64 100 148 153 103 189 109 40 91 134 38 172 21 165 28 53 145 120 194 143 0 49 126 57 191 73 27 80 112 12 10 23 42 136 63 138 158 186 95 154 197 108 177 115 41 142 125 159 182 129 93 157 71 193 111 67 26 140 20 187 133 155 5 96 6 167 178 36 163 122 92 170 196 44 90 183 150 185 131 1 192 51 171 85 105 61 54 116 88 199 8 83 188 77 89 4 39 55 30 19 144 128 149 52 102 69 119 22 33 25 9 152 160 164 166 114 124 32 18 13 59 174 179 162 86 34",
            ),
        ];
        for (n, input, expected) in cases {
            let mut keys: Vec<(usize, bool, i64, i64)> = input
                .split(' ')
                .enumerate()
                .map(|(id, k)| {
                    let f: Vec<i64> = k.split(',').map(|x| x.parse().unwrap()).collect();
                    (id, f[0] == 1, f[1], f[2])
                })
                .collect();
            assert_eq!(keys.len(), n);
            sort_func(&mut keys, &mut |a, b| {
                if !a.1 {
                    return true;
                }
                if !b.1 {
                    return false;
                }
                if a.2 != b.2 {
                    return a.2 > b.2;
                }
                if a.3 == -1 {
                    return false;
                }
                if b.3 == -1 {
                    return true;
                }
                a.3 < b.3
            });
            let order: Vec<String> = keys.iter().map(|k| k.0.to_string()).collect();
            assert_eq!(order.join(" "), expected, "n = {n}");
        }
    }
}
