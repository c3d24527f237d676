// C++ whose symbols need more than nested names and plain templates (test_demangle.py builds
// it and reads its symbols as c++filt prints them): variadic templates (pack expansions in
// parameters and in template arguments, empty packs, references collapsing), a lambda of a
// variadic template run through std::function, thunks (non-virtual, virtual, covariant), a
// local variable of a function template, arrays by pointer and by reference, callbacks as
// template arguments (the address of a function, a member function, a template's instance, a
// variable), SFINAE's conditions (enable_if over a dependent type's member, negated), generic
// lambdas (`auto` parameters), an inherited constructor.
#include <cstdio>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

template <typename... Args>
__attribute__((noinline)) int log_line(const char *format, Args &&...args) {
    return std::printf(format, std::forward<Args>(args)...);
}

template <typename... Args>
__attribute__((noinline)) int count_refs(const Args &...args) {
    return static_cast<int>(sizeof...(args));
}

template <typename... Args>
__attribute__((noinline)) int take_tuple(std::tuple<Args...> fields) {
    return static_cast<int>(std::tuple_size<decltype(fields)>::value);
}

template <typename T, typename... Rest>
__attribute__((noinline)) int head(T first, Rest... rest) {
    return static_cast<int>(first) + static_cast<int>(sizeof...(rest));
}

struct Pool {
    std::vector<std::function<void()>> jobs;

    template <typename F, typename... Args>
    __attribute__((noinline)) void submit(F &&job, Args &&...args) {
        jobs.emplace_back([job, args...]() mutable { job(args...); });
    }
};

template <typename... T>
struct Box {
    template <typename... U>
    __attribute__((noinline)) int put(U *...items) {
        return static_cast<int>(sizeof...(T) + sizeof...(U));
    }
};

template <typename T>
__attribute__((noinline)) int tally(T step) {
    static int total = 0;
    total += static_cast<int>(step);
    return total;
}

struct Reader { virtual ~Reader() {} virtual int read() { return 1; } int fd = 0; };
struct Writer { virtual ~Writer() {} virtual int write() { return 2; } int fd = 0; };
struct Channel : Reader, Writer {
    int read() override { return 3; }
    int write() override { return 4; }
};
struct Node { virtual ~Node() {} virtual int weight() { return 5; } };
struct Leaf : virtual Node { int weight() override { return 6; } };
struct Shape { virtual Shape *copy() { return this; } virtual ~Shape() {} };
struct Named { virtual ~Named() {} int id = 0; };
struct Circle : Named, Shape { Circle *copy() override { return this; } };

int check(int value) { return value + 1; }
template <typename T> T twice(T value) { return value * 2; }
struct Worker { int tick() { return 7; } };
int ticks = 0;

template <int (*Callback)(int)>
struct Timer {
    __attribute__((noinline)) int run(int value) { return Callback(value); }
};

template <int (Worker::*Method)()>
struct Schedule {
    __attribute__((noinline)) int run(Worker &worker) { return (worker.*Method)(); }
};

template <int *Counter>
__attribute__((noinline)) int bump() { return ++*Counter; }

template <typename T>
__attribute__((noinline)) typename std::enable_if<std::is_integral<T>::value, T>::type clamp_count(T value) {
    return value < 0 ? 0 : value;
}

template <typename T>
__attribute__((noinline)) typename std::enable_if<!std::is_integral<T>::value, int>::type clamp_count(T value) {
    return value < 0 ? 0 : static_cast<int>(value);
}

struct Counter {
    explicit Counter(int start) : value(start) {}
    template <typename T>
    Counter(T start, int step) : value(static_cast<int>(start) + step) {}
    int value;
};
struct Tally : Counter {
    using Counter::Counter;  // inherited constructors
};

__attribute__((noinline)) int sum_rows(int (*rows)[4], int count) {
    int sum = 0;
    for (int i = 0; i < count; i++)
        sum += rows[i][0];
    return sum;
}

template <typename T, unsigned N>
__attribute__((noinline)) unsigned extent(T (&)[N]) {
    return N;
}

int main(int argc, char **) {
    int number = argc;
    double ratio = 2.0;
    const char *word = "w";
    log_line("%d\n", number);
    log_line("%d %f\n", 1, ratio);
    log_line("\n");
    count_refs(number, ratio, word);
    count_refs();
    take_tuple(std::make_tuple(1, 2.0));
    take_tuple(std::tuple<>());
    head(1, 2.0, 'c');
    head(3);
    Pool pool;
    pool.submit([](int value) { std::printf("%d\n", value); }, 7);
    pool.submit([](int value, double share) { std::printf("%d %f\n", value, share); }, 7, ratio);
    for (auto &job : pool.jobs)
        job();
    Box<int, char> box;
    box.put(&number, &ratio);
    box.put();
    Channel channel;
    Reader *reader = &channel;
    Writer *writer = &channel;
    Leaf leaf;
    Node *node = &leaf;
    Circle circle;
    Shape *shape = &circle;
    int rows[2][4] = {{1}, {2}};
    int slots[7] = {};
    Worker worker;
    auto add = [](auto left, auto right) { return left + right; };
    auto measure = [argc](const auto &items) { return static_cast<int>(items.size()) + argc; };
    int generic = add(1, 2) + static_cast<int>(add(1.5, 2)) + measure(std::vector<int>{1}) + Tally(4).value +
                  Tally(2.5, 1).value;
    int callbacks = Timer<&check>().run(1) + Timer<&twice<int>>().run(2) + Schedule<&Worker::tick>().run(worker) +
                    bump<&ticks>() + clamp_count(-2) + static_cast<int>(clamp_count(3L)) + clamp_count(1.5);
    return reader->read() + writer->write() + node->weight() + (shape->copy() != nullptr) +
           sum_rows(rows, 2) + static_cast<int>(extent(slots) + extent(rows)) + tally(1) + tally(2.5) +
           callbacks + generic;
}
