// A C++ program whose namespaced method throws what nobody catches: std::terminate, abort.
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace storage {
template <typename Key> class Journal {
  public:
    __attribute__((noinline)) void replay(int from) {
        if (from > static_cast<int>(entries_.size())) throw std::out_of_range("replay past the end");
    }
    std::vector<Key> entries_;
};
namespace {
__attribute__((noinline)) void recover(Journal<std::string> &journal, int from) { journal.replay(from); }
}  // namespace
}  // namespace storage

int main(int argc, char **) {
    storage::Journal<std::string> journal;
    storage::recover(journal, argc + 1);
    std::puts("recovered");
    return 0;
}
