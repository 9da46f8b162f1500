//! Runs jobs in parallel, never more at once than cargo's jobserver allows.
//!
//! A build script owns one implicit token; every extra concurrent job first takes a token from
//! the jobserver (`cargo build -j N` shares N between all crates being built).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The jobserver cargo passed us, or a private one sized to this machine.
pub fn client_from_env_or_cpus() -> jobserver::Client {
    // SAFETY: called once per process, before any other file descriptors are opened by us;
    // the descriptors named in MAKEFLAGS/CARGO_MAKEFLAGS belong to the jobserver.
    if let Some(client) = unsafe { jobserver::Client::from_env() } {
        return client;
    }
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    jobserver::Client::new(cpus.saturating_sub(1).max(1)).expect("creating a local jobserver")
}

/// Applies `work` to every item; `done` is called (serialized) as each one finishes.
/// Results come back in input order.
pub fn run<T, R, W, D>(items: &[T], client: &jobserver::Client, work: W, done: D) -> Vec<R>
where
    T: Sync,
    R: Send,
    W: Fn(&T) -> R + Sync,
    D: Fn(&T, &R) + Send,
{
    let order: Vec<usize> = (0..items.len()).collect();
    run_in_order(items, &order, client, work, done)
}

/// As [`run`], starting the most expensive items first (by `cost`, ties in input order): the
/// longest job no longer starts last and leaves the other workers idle at the end.
pub fn run_costliest_first<T, R, C, W, D>(
    items: &[T],
    client: &jobserver::Client,
    cost: C,
    work: W,
    done: D,
) -> Vec<R>
where
    T: Sync,
    R: Send,
    C: Fn(&T) -> u64,
    W: Fn(&T) -> R + Sync,
    D: Fn(&T, &R) + Send,
{
    run_in_order(items, &costliest_first(items, cost), client, work, done)
}

/// Indices of `items`, highest cost first; equal costs keep input order (stable sort).
fn costliest_first<T>(items: &[T], cost: impl Fn(&T) -> u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cost(&items[i])));
    order
}

fn run_in_order<T, R, W, D>(
    items: &[T],
    order: &[usize],
    client: &jobserver::Client,
    work: W,
    done: D,
) -> Vec<R>
where
    T: Sync,
    R: Send,
    W: Fn(&T) -> R + Sync,
    D: Fn(&T, &R) + Send,
{
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let done = Mutex::new(done);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len())
        .max(1);
    std::thread::scope(|s| {
        for worker in 0..workers {
            let (next, results, done, work) = (&next, &results, &done, &work);
            s.spawn(move || loop {
                // Worker 0 runs on the token this process already holds.
                let token = if worker == 0 {
                    None
                } else {
                    client.acquire().ok()
                };
                if worker != 0 && token.is_none() {
                    return;
                }
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some(&i) = order.get(n) else {
                    return;
                };
                let r = work(&items[i]);
                drop(token);
                (done.lock().unwrap())(&items[i], &r);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_everything_in_order() {
        let client = jobserver::Client::new(2).unwrap();
        let items: Vec<u32> = (0..50).collect();
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let out = run(
            &items,
            &client,
            |x| x * 2,
            |_, _| {
                seen.fetch_add(1, Ordering::SeqCst);
            },
        );
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert_eq!(seen.load(Ordering::SeqCst), 50);
    }

    #[test]
    fn costliest_first_orders_by_cost_and_keeps_result_order() {
        let items: Vec<u64> = vec![3, 9, 1, 7, 9];
        assert_eq!(costliest_first(&items, |x| *x), vec![1, 4, 3, 0, 2]);
        let client = jobserver::Client::new(2).unwrap();
        let out = run_costliest_first(&items, &client, |x| *x, |x| x + 1, |_, _| {});
        assert_eq!(out, vec![4, 10, 2, 8, 10]);
    }
}
