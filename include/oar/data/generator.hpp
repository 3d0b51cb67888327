// oar::generator<T>: a lazy sequence written as a C++20 coroutine (`co_yield`), consumed with
// range-for. The DataLoader yields its batches through it. std::generator where the standard
// library has one (C++23); otherwise a small, cppcoro-style generator of our own.
#pragma once

#include "../config.hpp"  // OAR_HAS_STD_GENERATOR

#include <type_traits>  // std::is_object_v, std::remove_reference_t

#if OAR_HAS_STD_GENERATOR
#include <generator>  // std::generator
#else
#include <coroutine>  // std::coroutine_handle, std::suspend_always
#include <cstddef>    // std::ptrdiff_t
#include <exception>  // std::exception_ptr, std::rethrow_exception
#include <iterator>   // std::default_sentinel_t, std::input_iterator_tag
#include <memory>     // std::addressof
#include <ranges>     // std::ranges::input_range (checked below)
#include <utility>    // std::exchange
#endif

namespace oar {

/// Yieldable: what a generator<T> produces. T is an object type (the generator hands out
/// references to the yielded object) or a reference to one; never void.
template <class T>
concept Yieldable = std::is_object_v<std::remove_reference_t<T>>;

#if OAR_HAS_STD_GENERATOR

inline constexpr bool generator_is_std = true;

/// The standard generator. Its `*it` is `T&&` for a value T: bind with `auto&&` or `const auto&`.
template <Yieldable T>
using generator = std::generator<T>;

#else

inline constexpr bool generator_is_std = false;

/// A lazy, single-pass, move-only sequence of T produced by a coroutine body with `co_yield`.
///
///   oar::generator<int> count(int n) { for (int i = 0; i < n; ++i) co_yield i; }
///   for (auto&& i : count(3)) ...     // 0, 1, 2
///
/// Nothing runs until begin(). `co_yield x` suspends the body and stores only x's address (no copy,
/// as cppcoro): `*it` is a `T&` to the yielded object itself (or T for a reference T), valid until
/// the next `++it` resumes the body — a yielded temporary lives until then too. The consumer may
/// move from it. An exception escaping the body is rethrown from the begin() or ++ that resumed it,
/// after which the sequence is at its end. Destroying the generator early (breaking out of the loop)
/// destroys the suspended body's frame, running the destructors of everything alive in it.
/// begin() may be called once. Portable code binds `auto&&` or `const auto&` in range-for: with
/// std::generator (C++23) `*it` is `T&&`, which `auto&` does not bind.
template <Yieldable T>
class [[nodiscard]] generator {
public:
    using value_type = std::remove_cvref_t<T>;
    using reference = std::conditional_t<std::is_reference_v<T>, T, T&>;

    class promise_type {
    public:
        generator get_return_object() noexcept { return generator{handle::from_promise(*this)}; }
        std::suspend_always initial_suspend() const noexcept { return {}; }
        std::suspend_always final_suspend() const noexcept { return {}; }

        std::suspend_always yield_value(std::remove_reference_t<T>& value) noexcept {
            value_ = std::addressof(value);
            return {};
        }
        std::suspend_always yield_value(std::remove_reference_t<T>&& value) noexcept {
            value_ = std::addressof(value);
            return {};
        }
        void return_void() const noexcept {}
        void unhandled_exception() noexcept { error_ = std::current_exception(); }

        /// A generator body only yields; it never awaits.
        template <class U>
        std::suspend_never await_transform(U&&) = delete;

        reference value() const noexcept { return static_cast<reference>(*value_); }
        void rethrow_if_failed() {
            if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
        }

    private:
        std::remove_reference_t<T>* value_ = nullptr;
        std::exception_ptr error_;
    };

    using handle = std::coroutine_handle<promise_type>;

    class iterator {
    public:
        using iterator_concept = std::input_iterator_tag;
        using difference_type = std::ptrdiff_t;
        using value_type = generator::value_type;

        iterator() noexcept = default;
        explicit iterator(handle h) noexcept : h_(h) {}

        reference operator*() const noexcept { return h_.promise().value(); }
        std::remove_reference_t<reference>* operator->() const noexcept { return std::addressof(**this); }

        /// Resumes the body up to its next co_yield; rethrows what escaped it.
        iterator& operator++() {
            h_.resume();
            if (h_.done()) h_.promise().rethrow_if_failed();
            return *this;
        }
        void operator++(int) { ++*this; }

        friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return !it.h_ || it.h_.done(); }

    private:
        handle h_{};
    };

    generator() noexcept = default;
    generator(generator&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    generator& operator=(generator&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    generator(const generator&) = delete;
    generator& operator=(const generator&) = delete;
    ~generator() {
        if (h_) h_.destroy();
    }

    /// Runs the body to its first co_yield (or its end); rethrows what escaped it.
    iterator begin() {
        if (h_) {
            h_.resume();
            if (h_.done()) h_.promise().rethrow_if_failed();
        }
        return iterator{h_};
    }
    std::default_sentinel_t end() const noexcept { return {}; }

private:
    explicit generator(handle h) noexcept : h_(h) {}
    handle h_{};
};

static_assert(std::ranges::input_range<generator<int>>);
static_assert(std::ranges::input_range<generator<const int&>>);

#endif

}  // namespace oar
