//! The coarse quantiser of a large [`FlatIndex`] (an inverted file, IVF): the rows grouped
//! into lists around centroids found by k-means over a sample of them, so that a search
//! scores the rows of the few lists nearest its query instead of every row.
//!
//! The lists are made when the index reaches [`Probe::from`](super::Probe) rows (200,000:
//! 100 lists of about 2,000) and again each time it doubles (800,000 rows: 400 lists, which
//! a million fill to about 2,500); rows added in between join the list of their nearest
//! centroid. A search reads the 12 nearest lists (about 3 % of a million rows), and more
//! while fewer than `k` of the rows read pass its filter. Each list's rows lie next to each
//! other in the index's matrix ([`FlatIndex::permute`]), so a list is read as one stream.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::{Best, FlatIndex, Query, RowLabels, dot_i8, keep_best};
use crate::embed::{normalize, query_join};

/// k-means rounds over the sample.
const ROUNDS: usize = 8;
/// Sample rows per list the centroids are fitted to.
const SAMPLE_PER_LIST: usize = 40;

#[derive(Debug)]
pub(super) struct Lists {
    /// The centroids, unit vectors quantised as a query is.
    centroids: Vec<Query>,
    /// Each list's row positions.
    pub(super) members: Vec<Vec<u32>>,
    /// Each row's list, in row order.
    pub(super) of_row: Vec<u32>,
    /// Rows the index held when the lists were made.
    trained_on: usize,
    /// Rows placed since the rows were last put in list order: they sit away from their
    /// list's other rows, so a search reads them at a cache miss each.
    out_of_place: usize,
}

impl Lists {
    /// Fits centroids to a sample of `index`'s rows (spherical k-means: each centroid the
    /// normalised mean of its rows) and puts every row in its nearest centroid's list.
    pub(super) fn train(index: &FlatIndex) -> Lists {
        let rows = index.ids.len();
        let count = rows.div_ceil(index.probe.rows_per_list).max(1);
        let step = (rows / (count * SAMPLE_PER_LIST)).max(1);
        let sample: Vec<u32> = (0..rows as u32).step_by(step).collect();
        let mut centroids: Vec<Vec<f32>> =
            (0..count).map(|list| vector(index, sample[list * sample.len() / count])).collect();
        let dimensions = index.dimensions;
        for _ in 0..ROUNDS {
            let prepared: Vec<Query> =
                centroids.iter().map(|centroid| Query::new(centroid)).collect();
            let nearest = assign(index, &prepared, &sample);
            let mut sums = vec![0f32; count * dimensions];
            let mut sizes = vec![0usize; count];
            for (&row, &list) in sample.iter().zip(&nearest) {
                let (row, list) = (row as usize, list as usize);
                sizes[list] += 1;
                let scale = index.scales[row];
                let sum = &mut sums[list * dimensions..(list + 1) * dimensions];
                for (sum, &byte) in sum.iter_mut().zip(index.row(row)) {
                    *sum += f32::from(byte) * scale;
                }
            }
            for (list, centroid) in centroids.iter_mut().enumerate() {
                if sizes[list] == 0 {
                    // An empty list starts again from a sample row, spread by a prime step.
                    *centroid = vector(index, sample[(list * 7_919 + 13) % sample.len()]);
                } else {
                    centroid.copy_from_slice(&sums[list * dimensions..(list + 1) * dimensions]);
                    normalize(centroid);
                }
            }
        }
        let centroids: Vec<Query> = centroids.iter().map(|centroid| Query::new(centroid)).collect();
        let every: Vec<u32> = (0..rows as u32).collect();
        let of_row = assign(index, &centroids, &every);
        let mut members = vec![Vec::new(); count];
        for (row, &list) in of_row.iter().enumerate() {
            members[list as usize].push(row as u32);
        }
        Lists { centroids, members, of_row, trained_on: rows, out_of_place: 0 }
    }

    pub(super) fn trained_on(&self) -> usize {
        self.trained_on
    }

    pub(super) fn out_of_place(&self) -> usize {
        self.out_of_place
    }

    /// The rows in list order: each list's rows, one list after another.
    pub(super) fn order(&self) -> Vec<u32> {
        self.members.concat()
    }

    /// Follows [`FlatIndex::permute`] by [`Lists::order`]: each list's rows are now one run.
    pub(super) fn renumber(&mut self) {
        let mut next = 0;
        for (list, members) in self.members.iter_mut().enumerate() {
            let end = next + members.len() as u32;
            members.clear();
            members.extend(next..end);
            self.of_row[next as usize..end as usize].fill(list as u32);
            next = end;
        }
        self.out_of_place = 0;
    }

    /// Puts the row at `position` (new, the last row, or with a new vector) in the list of
    /// its nearest centroid.
    pub(super) fn place(&mut self, index: &FlatIndex, position: usize) {
        let list = nearest(index, &self.centroids, position);
        if position == self.of_row.len() {
            self.of_row.push(list);
        } else {
            let old = self.of_row[position];
            if old == list {
                return;
            }
            take_out(&mut self.members[old as usize], position as u32);
            self.of_row[position] = list;
        }
        self.members[list as usize].push(position as u32);
        self.out_of_place += 1;
    }

    /// Follows the index's removal of the row at `position`, where its `last` row moves.
    pub(super) fn remove(&mut self, position: usize, last: usize) {
        take_out(&mut self.members[self.of_row[position] as usize], position as u32);
        if position != last {
            let moved = self.of_row[last];
            let members = &mut self.members[moved as usize];
            if let Some(member) = members.iter_mut().find(|member| **member == last as u32) {
                *member = position as u32;
            }
            self.of_row[position] = moved;
            self.out_of_place += 1;
        }
        self.of_row.pop();
    }

    /// The `k` best admitted rows of the lists nearest `query`, in no order: the nearest
    /// [`Probe::lists`](super::Probe), then twice as many more at a time while fewer than `k`
    /// of the rows read passed the filter.
    pub(super) fn search(
        &self,
        index: &FlatIndex,
        query: &Query,
        admits: &(impl Fn(&RowLabels) -> bool + Sync),
        k: usize,
    ) -> Vec<(usize, f32)> {
        // The lists by their centroid's similarity to the query, nearest first.
        let similarity =
            |centroid: &Query| dot_i8(&centroid.bytes, &query.bytes) as f32 * centroid.scale;
        let mut order: Vec<(u32, f32)> = self
            .centroids
            .iter()
            .enumerate()
            .map(|(list, c)| (list as u32, similarity(c)))
            .collect();
        order.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        let (mut found, mut admitted, mut read) = (Vec::new(), 0, 0);
        let mut batch = index.probe.lists;
        while read < order.len() && admitted < k {
            let lists = &order[read..(read + batch).min(order.len())];
            read += lists.len();
            batch *= 2;
            let rows: usize =
                lists.iter().map(|(list, _)| self.members[*list as usize].len()).sum();
            // Alternate lists to each thread: the nearest are spread over both.
            let part = |parity: usize| {
                let positions = lists.iter().skip(parity).step_by(2).flat_map(|(list, _)| {
                    self.members[*list as usize].iter().map(|&row| row as usize)
                });
                let mut best = Best::new(k, rows);
                let admitted = index.score(positions, query, admits, &mut best);
                (best.into_vec(), admitted)
            };
            let ((first, a), (second, b)) = if rows < super::PARALLEL_ROWS {
                (part(0), part(1))
            } else {
                query_join(|| part(0), || part(1))
            };
            found.extend(first);
            found.extend(second);
            admitted += a + b;
        }
        keep_best(found, k)
    }
}

/// The row at `position` back as a unit vector.
fn vector(index: &FlatIndex, position: u32) -> Vec<f32> {
    let scale = index.scales[position as usize];
    let mut vector: Vec<f32> =
        index.row(position as usize).iter().map(|&byte| f32::from(byte) * scale).collect();
    normalize(&mut vector);
    vector
}

/// Each of `rows`' nearest centroid, in two halves on two threads.
fn assign(index: &FlatIndex, centroids: &[Query], rows: &[u32]) -> Vec<u32> {
    let half = |rows: &[u32]| -> Vec<u32> {
        let mut nearest = Vec::with_capacity(rows.len());
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = index.simd {
            simd.vectorize(|| {
                for &row in rows {
                    let row = index.row(row as usize);
                    nearest.push(best_of(
                        centroids.iter().map(|c| avx2::dot(simd, row, &c.blocks) as f32 * c.scale),
                    ));
                }
            });
            return nearest;
        }
        for &row in rows {
            let row = index.row(row as usize);
            nearest.push(best_of(centroids.iter().map(|c| dot_i8(row, &c.bytes) as f32 * c.scale)));
        }
        nearest
    };
    if rows.len() < super::PARALLEL_ROWS / 10 {
        return half(rows);
    }
    let (first, second) = rows.split_at(rows.len() / 2);
    let (mut first, second) = query_join(|| half(first), || half(second));
    first.extend(second);
    first
}

/// The centroid nearest the row at `position`.
fn nearest(index: &FlatIndex, centroids: &[Query], position: usize) -> u32 {
    assign(index, centroids, &[position as u32])[0]
}

/// The centroid whose similarity is largest, from each centroid's dot product with a row
/// (times its scale; the row's own scale is common to all, so left out).
#[inline(always)]
fn best_of(similarities: impl Iterator<Item = f32>) -> u32 {
    let mut best = (0, f32::NEG_INFINITY);
    for (list, similarity) in similarities.enumerate() {
        if similarity > best.1 {
            best = (list as u32, similarity);
        }
    }
    best.0
}

/// Removes `row` from a list (order is not kept).
fn take_out(members: &mut Vec<u32>, row: u32) {
    if let Some(at) = members.iter().position(|&member| member == row) {
        members.swap_remove(at);
    }
}
