//! Redis's `pqsort` (a partial quicksort after Bentley and McIlroy's, as in BSD's `qsort`):
//! sorts only as much as it takes for the elements of ranks `lrange..=rrange` to be in
//! place. The geo searches use it for `COUNT` below the number of matches, and it is not
//! stable, so members at equal distances come back in the order only this same algorithm
//! gives; it is rewritten here step for step (insertion sort below 7 elements, median of
//! three or ninther pivot, three-way partition with the equal keys swapped to the ends).
//! Like Redis's, it is quadratic on inputs built against its pivot choice.

use std::cmp::Ordering;

/// Sorts `v` with `cmp` enough that ranks `lrange..=rrange` hold what a full sort gives.
///
/// Redis recurses into the lower part of each partition and loops on the upper one; the
/// parts are disjoint and each is sorted on its own, so the order they are taken in does not
/// change the result. They are kept in a list here instead, so that a partition sequence a
/// client arranged (median-of-three killers) cannot exhaust the thread's stack.
pub(crate) fn pqsort<T>(
    v: &mut [T],
    cmp: &impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
) {
    let mut parts = vec![(0, v.len())];
    while let Some((lo, n)) = parts.pop() {
        sort_part(v, lo, n, cmp, lrange, rrange, &mut parts);
    }
}

/// Whether the part `lo..lo + n` lies wholly before or wholly after the wanted ranks.
fn outside(lo: usize, n: usize, lrange: usize, rrange: usize) -> bool {
    (lrange < lo && rrange < lo) || (lrange >= lo + n && rrange >= lo + n)
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    if cmp(&v[a], &v[b]) == Ordering::Less {
        if cmp(&v[b], &v[c]) == Ordering::Less {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Ordering::Greater {
        b
    } else if cmp(&v[a], &v[c]) == Ordering::Less {
        a
    } else {
        c
    }
}

/// Swaps the `n` elements from `a` with the `n` from `b`, pairwise.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Partitions `lo..lo + n` as Redis's `_pqsort` does, leaving its lower part (Redis's
/// recursive call) in `parts` and going on with the upper one.
fn sort_part<T>(
    v: &mut [T],
    mut lo: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
    parts: &mut Vec<(usize, usize)>,
) {
    loop {
        if n < 7 {
            for pm in lo + 1..lo + n {
                let mut pl = pm;
                while pl > lo && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = lo + n / 2;
        if n > 7 {
            let mut pl = lo;
            let mut pn = lo + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(lo, pm);
        let (mut pa, mut pb) = (lo + 1, lo + 1);
        let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
        loop {
            while pb <= pc {
                match cmp(&v[pb], &v[lo]) {
                    Ordering::Greater => break,
                    Ordering::Equal => {
                        v.swap(pa, pb);
                        pa += 1;
                    }
                    Ordering::Less => {}
                }
                pb += 1;
            }
            while pb <= pc {
                match cmp(&v[pc], &v[lo]) {
                    Ordering::Less => break,
                    Ordering::Equal => {
                        v.swap(pc, pd);
                        pd -= 1;
                    }
                    Ordering::Greater => {}
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = lo + n;
        let r = (pa - lo).min(pb - pa);
        vecswap(v, lo, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(lo, r, lrange, rrange) {
            parts.push((lo, r));
        }
        let r = pd - pc;
        if r <= 1 {
            return;
        }
        // The upper part by iteration, as Redis's `goto loop`.
        lo = pn - r;
        n = r;
        if outside(lo, n, lrange, rrange) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wanted_ranks_come_out_sorted() {
        let mut seed = 12345u64;
        for len in [0usize, 1, 5, 7, 8, 41, 100, 300] {
            for k in [1usize, 3, 10, 50] {
                let mut v: Vec<u32> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (seed >> 40) as u32 % 50
                    })
                    .collect();
                let mut sorted = v.clone();
                sorted.sort();
                if len == 0 {
                    continue;
                }
                let k = k.min(len);
                pqsort(&mut v, &|a: &u32, b: &u32| a.cmp(b), 0, k - 1);
                assert_eq!(&v[..k], &sorted[..k], "len {len} k {k}");
            }
        }
    }

    #[test]
    fn many_equal_and_sorted_inputs_do_not_recurse() {
        // Sorted, reversed and all-equal inputs of a size that would be deep as recursion.
        for v in [
            (0..200_000u32).collect::<Vec<_>>(),
            (0..200_000u32).rev().collect(),
            vec![7u32; 200_000],
        ] {
            let mut v = v;
            pqsort(&mut v, &|a: &u32, b: &u32| a.cmp(b), 0, 9);
            let mut head = v[..10].to_vec();
            head.sort();
            assert_eq!(v[..10], head[..]);
            assert!(v[..10].iter().all(|x| v[10..].iter().all(|y| x <= y)));
        }
    }

    #[test]
    fn ties_are_not_kept_in_order() {
        // 8 equal keys then a smaller one: the partition moves equal keys around, as Redis's.
        let mut v: Vec<(u8, u8)> = (0..8).map(|i| (1, i)).chain([(0, 8)]).collect();
        pqsort(&mut v, &|a: &(u8, u8), b: &(u8, u8)| a.0.cmp(&b.0), 0, 2);
        assert_eq!(v[0], (0, 8));
        assert!(v[1..3].iter().all(|e| e.0 == 1));
    }
}
