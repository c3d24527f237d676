// Rust's runtime between a panic and the abort (built with -C panic=abort): the program's own
// function is guilty, never std::panicking, core::option's unwrap failure, core's generic code
// it instantiated or the abort. And a runaway recursion, which std's guard-page handler reports
// and aborts.
use std::env;

#[inline(never)]
fn pick_worker(workers: &[u32], wanted: usize) -> u32 {
    let found: Option<&u32> = workers.iter().find(|w| **w as usize == wanted);
    *found.unwrap()
}

#[inline(never)]
fn parse_port(text: &str) -> u16 {
    text.parse::<u16>().unwrap()
}

#[inline(never)]
fn give_up(reason: &str) -> ! {
    eprintln!("giving up: {reason}");
    std::process::abort()
}

#[inline(never)]
fn read_slot(slots: &[u64], at: usize) -> u64 {
    slots[at]
}

// A Vec indexed past its end on a worker thread: the index goes through core's generic
// `<usize as SliceIndex<[T]>>::index`, instantiated in this program.
#[inline(never)]
fn tally(counts: &Vec<u64>, at: usize) -> u64 {
    counts[at]
}

#[inline(never)]
fn walk_tree(depth: u64, parent: &[u8; 256]) -> u64 {
    let mut node = [0u8; 256];
    node[0] = parent[0].wrapping_add(depth as u8);
    walk_tree(depth + 1, &node) + node[0] as u64
}

fn main() {
    let mode = env::args().nth(1).unwrap_or_default();
    let workers = vec![1u32, 2, 3];
    let count = env::args().count();
    match mode.as_str() {
        "option-unwrap" => println!("{}", pick_worker(&workers, 7 + count)),
        "result-unwrap" => println!("{}", parse_port(if count > 9 { "80" } else { "eighty" })),
        "abort" => give_up("no workers"),
        "index" => println!("{}", read_slot(&[1, 2, 3], 5 + count)),
        "thread-index" => {
            let worker = std::thread::spawn(move || tally(&vec![1, 2, 3], 5 + count));
            println!("{}", worker.join().unwrap_or_default())
        }
        "recurse" => println!("{}", walk_tree(count as u64, &[0u8; 256])),
        _ => std::process::exit(2),
    }
}
