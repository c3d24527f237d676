// Failure classes of C++ programs beside crashy.cc's uncaught exception (issue 40): the standard
// library's own code, instantiated in the program (or, with -static-libstdc++, linked into it),
// throwing for it. Argument: the class.
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace inventory {

// vector::at past the end: std::vector<int>::_M_range_check (in this program) throws out_of_range.
__attribute__((noinline)) int lookup(const std::vector<int> &stock, std::size_t slot) {
    return stock.at(slot);
}

// A string made from a null pointer: basic_string's constructor (in this program) throws logic_error.
__attribute__((noinline)) std::size_t name_length(const char *name) {
    return std::string(name).size();
}

// Far more than any heap can give: operator new (the C++ runtime's, linked into the program
// with -static-libstdc++) throws bad_alloc.
__attribute__((noinline)) char *reserve(std::size_t items) {
    char *shelf = new char[items];
    shelf[0] = 1;
    return shelf;
}

// A lambda that dereferences NULL for a negative count, run by std::for_each: optimised, both
// are inlined into this function, and the debug info names the lambda's inlined call
// `operator()`, as it names every lambda's.
__attribute__((noinline)) int total(const std::vector<int> &counts) {
    int sum = 0;
    std::for_each(counts.begin(), counts.end(), [&sum](int count) {
        int *volatile missing = nullptr;
        sum += count < 0 ? *missing : count;
    });
    return sum;
}

// A job that throws on a thread the program started: std::thread's invoker (std::__invoke_impl,
// in this program: a variadic template's instance) calls it, the exception escapes the thread
// and std::terminate aborts.
__attribute__((noinline)) void recount(int shelves) {
    std::vector<int> counts(static_cast<std::size_t>(shelves));
    if (shelves > 2)
        throw std::runtime_error("recount failed");
    counts[0] = shelves;
}

// A variadic template's instance writes through a null journal: its symbol spells its
// parameters as a pack expansion (`DpOT_`).
struct Journal {
    int entries[8];
    int used;
};

template <typename... Fields>
__attribute__((noinline)) void record(Journal *journal, Fields &&...fields) {
    int values[] = {static_cast<int>(fields)...};
    for (int value : values)
        journal->entries[journal->used++] = value;
}

// A job run through a variadic template's lambda (as a pool runs one): the job faults, called
// from a frame named inside the template's instance.
template <typename Job, typename... Args>
__attribute__((noinline)) int run_job(Job &&job, Args &&...args) {
    auto bound = [&job, &args...]() { return job(args...); };
    return bound();
}

// A class template over the standard library's containers reads its index through a null
// pointer: as c++filt prints them, its member function's name and the std::map code's below it
// run past 1,500 characters each (names a core reader sends whole).
using Shelves = std::map<std::string, std::vector<std::pair<std::string, std::map<int, std::string>>>>;

template <typename Index>
struct Catalog {
    Index *index;
    __attribute__((noinline)) std::size_t count(const std::string &key) const { return index->count(key); }
};

}  // namespace inventory

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    std::vector<int> stock{3, 1, 4};
    if (!std::strcmp(mode, "at"))
        return inventory::lookup(stock, 5 + argc);
    if (!std::strcmp(mode, "null-string"))
        return static_cast<int>(inventory::name_length(argc > 9 ? argv[0] : nullptr));
    if (!std::strcmp(mode, "lambda"))
        return inventory::total({3, -1, 4}) + 1;
    if (!std::strcmp(mode, "thread-throw")) {
        std::thread job(inventory::recount, argc + 2);
        job.join();
        return 0;
    }
    if (!std::strcmp(mode, "variadic")) {
        inventory::Journal *journal = argc > 9 ? new inventory::Journal() : nullptr;
        inventory::record(journal, argc, 2.5);
        return 0;
    }
    if (!std::strcmp(mode, "long-names")) {
        inventory::Catalog<inventory::Shelves> catalog{argc > 9 ? new inventory::Shelves() : nullptr};
        return static_cast<int>(catalog.count(mode));
    }
    if (!std::strcmp(mode, "variadic-job")) {
        int *slot = argc > 9 ? &argc : nullptr;
        return inventory::run_job([](int *shelf) { return *shelf + 1; }, slot);
    }
    if (!std::strcmp(mode, "bad-alloc"))
        return inventory::reserve(std::size_t{1} << (60 + argc))[0];
    return 2;
}
