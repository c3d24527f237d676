// Failure classes of C++ programs beside crashy.cc's uncaught exception (issue 40): the standard
// library's own code, instantiated in the program, throwing for it. Argument: the class.
#include <cstring>
#include <string>
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

}  // namespace inventory

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    std::vector<int> stock{3, 1, 4};
    if (!std::strcmp(mode, "at"))
        return inventory::lookup(stock, 5 + argc);
    if (!std::strcmp(mode, "null-string"))
        return static_cast<int>(inventory::name_length(argc > 9 ? argv[0] : nullptr));
    return 2;
}
