// Tests of include/oar/data/generator.hpp: laziness, order, the reference handed out, exceptions
// at begin and ++, destruction of an abandoned frame, moves, and use as a std::ranges range.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <algorithm>    // std::ranges::find_if, std::ranges::for_each
#include <concepts>     // std::copy_constructible, std::movable
#include <iterator>     // std::default_sentinel, std::input_iterator
#include <ranges>       // std::ranges::input_range, std::ranges::end
#include <stdexcept>    // std::runtime_error
#include <string>       // std::string, std::to_string
#include <type_traits>  // std::remove_cvref_t, std::is_copy_assignable_v, std::is_same_v
#include <utility>      // std::move, std::exchange, std::pair, std::declval
#include <vector>       // std::vector

#include <oar/data/generator.hpp>  // under test

using oar::generator;

namespace {

generator<int> count_to(int n) {
    for (int i = 0; i < n; ++i) co_yield i;
}

/// Sets *flag when destroyed: shows whether a coroutine frame's locals were destroyed.
struct SetsOnDestroy {
    bool* flag;
    explicit SetsOnDestroy(bool* f) : flag(f) {}
    SetsOnDestroy(SetsOnDestroy&& o) noexcept : flag(std::exchange(o.flag, nullptr)) {}
    ~SetsOnDestroy() {
        if (flag) *flag = true;
    }
};

template <class G>
auto collect(G&& g) {
    std::vector<std::remove_cvref_t<decltype(*g.begin())>> out;
    for (auto&& v : g) out.push_back(v);
    return out;
}

}  // namespace

static_assert(std::ranges::input_range<generator<int>>);
static_assert(std::ranges::input_range<generator<std::string>>);
static_assert(std::ranges::input_range<generator<const std::string&>>);
static_assert(std::input_iterator<std::ranges::iterator_t<generator<int>>>);
static_assert(std::movable<generator<int>>);
static_assert(!std::copy_constructible<generator<int>>);
static_assert(!std::is_copy_assignable_v<generator<int>>);

TEST_CASE("a generator yields its co_yield values in order and then ends") {
    CHECK(collect(count_to(5)) == std::vector<int>{0, 1, 2, 3, 4});
    CHECK(collect(count_to(0)).empty());
}

TEST_CASE("the body runs only when iteration begins, and only up to the next co_yield") {
    int steps = 0;
    auto body = [](int& s) -> generator<int> {
        ++s;
        co_yield 1;
        ++s;
        co_yield 2;
        ++s;
    };
    auto g = body(steps);
    CHECK(steps == 0);
    auto it = g.begin();
    CHECK(steps == 1);
    CHECK(*it == 1);
    ++it;
    CHECK(steps == 2);
    CHECK(*it == 2);
    CHECK(it != std::default_sentinel);
    ++it;
    CHECK(steps == 3);
    CHECK(it == std::default_sentinel);
}

TEST_CASE("an iterator works with the manual begin / ++ / end protocol and postfix ++") {
    auto g = count_to(3);
    std::vector<int> seen;
    for (auto it = g.begin(); it != g.end(); it++) seen.push_back(*it);
    CHECK(seen == std::vector<int>{0, 1, 2});
}

TEST_CASE("*it is the yielded object itself, which the body sees changed after ++") {
    struct Box {
        int value = 0;
    };
    std::vector<int> seen_by_body;
    auto body = [](std::vector<int>& seen) -> generator<Box> {
        Box b{1};
        co_yield b;  // an lvalue: our generator hands out b itself (std::generator a copy)
        seen.push_back(b.value);
        co_yield Box{2};
    };
    auto g = body(seen_by_body);
    auto it = g.begin();
    CHECK(it->value == 1);
    (*it).value = 42;
    ++it;
    CHECK(it->value == 2);
    if (!oar::generator_is_std) {
        REQUIRE(seen_by_body.size() == 1);
        CHECK(seen_by_body[0] == 42);
    }
}

TEST_CASE("a yielded temporary stays alive until the consumer advances") {
    bool destroyed = false;
    auto body = [](bool* flag) -> generator<SetsOnDestroy> { co_yield SetsOnDestroy(flag); };
    auto g = body(&destroyed);
    auto it = g.begin();
    CHECK(it->flag == &destroyed);
    CHECK_FALSE(destroyed);
    ++it;
    CHECK(destroyed);
    CHECK(it == g.end());
}

TEST_CASE("the consumer can move a yielded value out") {
    auto words = []() -> generator<std::string> {
        std::string s(100, 'x');
        co_yield std::move(s);
        co_yield std::string(50, 'y');
    };
    std::vector<std::string> out;
    for (auto&& w : words()) out.push_back(std::move(w));
    REQUIRE(out.size() == 2);
    CHECK(out[0] == std::string(100, 'x'));
    CHECK(out[1] == std::string(50, 'y'));
}

// With our generator `*it` is a T& into the frame, so `for (auto& v : g)` compiles; with
// std::generator it is T&&, so portable code (these tests) binds `auto&&`.
static_assert(oar::generator_is_std ||
              std::is_same_v<decltype(*std::declval<generator<int>&>().begin()), int&>);
static_assert(oar::generator_is_std ||
              std::is_same_v<decltype(*std::declval<generator<const int&>&>().begin()), const int&>);

TEST_CASE("*it refers into the frame: changing it changes the body's own variable") {
    std::vector<int> seen;
    for (auto&& v : count_to(10)) {
        seen.push_back(v);
        v += 2;  // our generator: the body's loop counter itself, so it then yields 3, 6, 9
    }
    if (!oar::generator_is_std) CHECK(seen == std::vector<int>{0, 3, 6, 9});
}

TEST_CASE("a generator of references hands out the referenced objects") {
    std::vector<int> data{1, 2, 3};
    auto refs = [](std::vector<int>& v) -> generator<int&> {
        for (int& x : v) co_yield x;
    };
    for (int& x : refs(data)) x *= 10;
    CHECK(data == std::vector<int>{10, 20, 30});

    const std::vector<std::string> names{"a", "bc"};
    auto crefs = [](const std::vector<std::string>& v) -> generator<const std::string&> {
        for (const auto& s : v) co_yield s;
    };
    std::vector<const std::string*> addresses;
    for (const std::string& s : crefs(names)) addresses.push_back(&s);
    CHECK(addresses == std::vector<const std::string*>{&names[0], &names[1]});
}

TEST_CASE("a value of another type is converted on co_yield") {
    auto widen = []() -> generator<long long> {
        int small = 7;
        co_yield small;
        co_yield 1 << 20;
    };
    CHECK(collect(widen()) == std::vector<long long>{7, 1 << 20});
}

TEST_CASE("an exception thrown before the first co_yield reaches the consumer at begin") {
    auto fails = []() -> generator<int> {
        throw std::runtime_error("before any value");
        co_yield 1;
    };
    auto g = fails();
    CHECK_THROWS_WITH_AS(g.begin(), "before any value", std::runtime_error);
}

TEST_CASE("an exception thrown after some values reaches the consumer at the ++ that resumed the body") {
    auto fails_at = [](int n) -> generator<int> {
        for (int i = 0;; ++i) {
            if (i == n) throw std::runtime_error("failed at " + std::to_string(i));
            co_yield i;
        }
    };
    auto g = fails_at(2);
    auto it = g.begin();
    CHECK(*it == 0);
    ++it;
    CHECK(*it == 1);
    CHECK_THROWS_WITH_AS(++it, "failed at 2", std::runtime_error);
    CHECK(it == g.end());  // the body has finished

    std::vector<int> seen;
    auto run = [&] {
        for (auto&& v : fails_at(3)) seen.push_back(v);
    };
    CHECK_THROWS_AS(run(), std::runtime_error);
    CHECK(seen == std::vector<int>{0, 1, 2});
}

TEST_CASE("destroying a generator half-way destroys its frame and everything alive in it") {
    bool local_destroyed = false, param_destroyed = false, resumed_after_break = false;
    auto body = [](SetsOnDestroy param, bool* local_flag, bool* resumed) -> generator<int> {
        SetsOnDestroy local(local_flag);
        for (int i = 0; i < 1000; ++i) co_yield i;
        *resumed = true;
        (void)param;
    };
    {
        auto g = body(SetsOnDestroy(&param_destroyed), &local_destroyed, &resumed_after_break);
        for (auto&& v : g)
            if (v == 2) break;
        CHECK_FALSE(local_destroyed);
        CHECK_FALSE(param_destroyed);
    }
    CHECK(local_destroyed);
    CHECK(param_destroyed);
    CHECK_FALSE(resumed_after_break);
}

TEST_CASE("a generator destroyed before it starts destroys its parameters and runs nothing") {
    bool param_destroyed = false, ran = false;
    auto body = [](SetsOnDestroy, bool* r) -> generator<int> {
        *r = true;
        co_yield 1;
    };
    { auto g = body(SetsOnDestroy(&param_destroyed), &ran); }
    CHECK(param_destroyed);
    CHECK_FALSE(ran);
}

TEST_CASE("moving a generator moves the coroutine and leaves an empty, ended source") {
    auto a = count_to(3);
    auto b = std::move(a);
    CHECK(a.begin() == a.end());  // NOLINT(bugprone-use-after-move): moved-from is specified empty
    CHECK(collect(b) == std::vector<int>{0, 1, 2});

    bool destroyed = false;
    auto holds = [](bool* flag) -> generator<int> {
        SetsOnDestroy guard(flag);
        co_yield 1;
        co_yield 2;
    };
    auto c = holds(&destroyed);
    CHECK(*c.begin() == 1);
    c = count_to(2);  // move-assignment destroys the old frame
    CHECK(destroyed);
    CHECK(collect(c) == std::vector<int>{0, 1});
}

TEST_CASE("an endless generator is fine when the consumer stops") {
    auto fibonacci = []() -> generator<long long> {
        long long a = 0, b = 1;
        for (;;) {
            co_yield a;
            a = std::exchange(b, a + b);
        }
    };
    std::vector<long long> first;
    for (auto&& f : fibonacci()) {
        if (first.size() == 10) break;
        first.push_back(f);
    }
    CHECK(first == std::vector<long long>{0, 1, 1, 2, 3, 5, 8, 13, 21, 34});
}

TEST_CASE("a generator works with std::ranges algorithms over input ranges") {
    // (std::views adaptors are left out: clang 14 cannot compile libstdc++ 12's views at all.)
    auto g = count_to(10);
    const auto it = std::ranges::find_if(g, [](int x) { return x * x > 20; });
    REQUIRE(it != std::ranges::end(g));
    CHECK(*it == 5);

    int sum = 0;
    std::ranges::for_each(count_to(5), [&](int x) { sum += x; });
    CHECK(sum == 10);
}

TEST_CASE("generators nest: one body can iterate another") {
    auto pairs = [](int n) -> generator<std::pair<int, int>> {
        for (int i : count_to(n))
            for (int j : count_to(i)) co_yield {i, j};
    };
    std::vector<std::pair<int, int>> got;
    for (auto&& p : pairs(3)) got.push_back(p);
    CHECK(got == std::vector<std::pair<int, int>>{{1, 0}, {2, 0}, {2, 1}});
}
