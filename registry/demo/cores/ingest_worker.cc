// ingest-worker, the demo fleet's program, cut down to its two crashes: the cores in
// ingest-worker.tar.xz are of this program (README.md here: how they were made).
#include <cstring>
#include <thread>
#include <vector>

#ifndef RELEASE
#define RELEASE "dev"
#endif
extern "C" const char release[] = RELEASE;  // the releases differ here, so their build-ids do
volatile long sink;

namespace ingest {

struct Ring {
    long head;
    long slots[64];
};

__attribute__((noinline)) void publish(long value) { sink += value; }

// Commits a record, then returns through a saved return address that is 0: what a flipped bit
// on a bad host or the race on the ring's head leaves there. `ret` pops the 0: pc 0.
__attribute__((noinline)) void ring_buffer_commit(Ring &ring, long value) {
    ring.slots[ring.head++ % 64] = value;
    publish(value);
    static_cast<void *volatile *>(__builtin_frame_address(0))[1] = nullptr;
}

struct Chunk {
    long first, last;
};

// Merges a chunk index the race left half built: a slot still holds no chunk, and the merge
// reads through it (SIGSEGV at a small address).
__attribute__((noinline)) long chunk_index_merge(Chunk *const *index, int count) {
    long span = 0;
    for (int i = 0; i < count; ++i) span += index[i]->last - index[i]->first;
    publish(span);
    return span;
}

__attribute__((noinline)) void worker_loop(const char *mode) {
    Ring ring{};
    Chunk built{0, 4096};
    std::vector<Chunk *> index{&built, nullptr};
    if (!strcmp(mode, "ring"))
        ring_buffer_commit(ring, 7);
    else
        chunk_index_merge(index.data(), static_cast<int>(index.size()));
}

}  // namespace ingest

int main(int argc, char **argv) {
    std::thread worker(ingest::worker_loop, argc > 1 ? argv[1] : "");
    worker.join();
    return 0;
}
