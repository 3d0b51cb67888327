// A small persistent thread pool for the CPU kernels: `size()` threads (the caller counts as one),
// and `parallel_for(tasks, f)` running f(task) for every task in [0, tasks) with a static split
// (thread t takes a fixed contiguous range), returning when all are done. Kernels keep their
// results independent of the thread count by giving each task disjoint outputs and reducing in a
// fixed order. A parallel_for called from inside a task runs serially on that thread (no nesting).
// `default_pool()` has OAR_NUM_THREADS threads, else std::thread::hardware_concurrency();
// set_num_threads(n) replaces it.
// Waking a sleeping thread costs tens of microseconds on a VM (the idle vCPU halts), so a worker
// that finished a task polls for the next call for a short while (spin_us, default 300 us;
// OAR_POOL_SPIN_US) before it sleeps on the condition variable, and the caller polls for the
// workers' completion likewise. Polling only pays when the threads run on different CPUs: when a
// call finds the worker ran on the caller's CPU (a scheduler that gives the process one core), the
// pool stops polling until a call sees them on different CPUs again.
#pragma once

#include <atomic>              // std::atomic
#include <chrono>              // std::chrono::steady_clock: the polling budget
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::size_t
#include <cstdlib>             // std::getenv, std::strtoul
#include <exception>           // std::exception_ptr
#include <memory>              // std::unique_ptr (the replaceable default pool)
#include <mutex>               // std::mutex, std::unique_lock
#include <string>              // std::string (error message)
#include <thread>              // std::thread
#include <utility>             // std::exchange
#include <vector>              // std::vector

#include "error.hpp"  // value_error

#if defined(__linux__)
#include <sched.h>  // sched_getcpu: whether the threads share a CPU
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _mm_pause in polling loops
#endif

namespace oar {

namespace detail {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}
/// The CPU this thread runs on, or -1 where unknown.
inline int current_cpu() {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}
/// Polls pred() for up to `us` microseconds; true as soon as it holds.
template <class P>
bool poll_for(std::size_t us, P pred) {
    if (us == 0) return pred();
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (pred()) return true;
            cpu_relax();
        }
        if (std::chrono::steady_clock::now() >= until) return pred();
    }
}
}  // namespace detail

/// Microseconds a pool's threads poll before sleeping: OAR_POOL_SPIN_US when set (0: never poll),
/// else 300 (more than the gaps between a training step's kernels). A malformed value is an error.
inline std::size_t default_pool_spin_us() {
    if (const char* env = std::getenv("OAR_POOL_SPIN_US"); env && *env) {
        char* end = nullptr;
        const unsigned long us = std::strtoul(env, &end, 10);
        if (*end != '\0' || *env == '-' || us > 1000000)
            throw value_error(std::string("OAR_POOL_SPIN_US: expected microseconds from 0 to 1000000, got \"") + env +
                              "\"");
        return us;
    }
    return 300;
}

class ThreadPool {
public:
    /// A pool of `threads` threads in all (>= 1): the caller plus threads - 1 workers, which poll
    /// for up to `spin_us` microseconds for the next call before sleeping.
    explicit ThreadPool(std::size_t threads, std::size_t spin_us = default_pool_spin_us())
        : size_(threads), spin_us_(spin_us) {
        if (threads == 0) throw value_error("ThreadPool: the thread count must be at least 1");
        workers_.reserve(threads - 1);
        for (std::size_t t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
    }
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    ~ThreadPool() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
            stop_flag_.store(true, std::memory_order_relaxed);
        }
        wake_.notify_all();
        for (auto& w : workers_) w.join();
    }

    std::size_t size() const { return size_; }
    std::size_t spin_us() const { return spin_us_; }

    /// The first task of thread t's static range when `tasks` tasks are split over `parts` threads.
    static constexpr std::size_t chunk_begin(std::size_t tasks, std::size_t parts, std::size_t t) {
        return tasks / parts * t + (t < tasks % parts ? t : tasks % parts);
    }

    /// Runs f(i) for i in [0, tasks), thread t taking [chunk_begin(t), chunk_begin(t+1)). The first
    /// exception thrown by a task is rethrown here after every thread has finished its range.
    template <class F>
    void parallel_for(std::size_t tasks, F&& f) {
        const std::size_t parts = tasks < size_ ? tasks : size_;
        if (parts <= 1 || in_task()) {
            for (std::size_t i = 0; i < tasks; ++i) f(i);
            return;
        }
        std::lock_guard serial(call_mutex_);  // one parallel_for at a time from outside threads
        auto body = [&](std::size_t t) {
            const std::size_t b = chunk_begin(tasks, parts, t), e = chunk_begin(tasks, parts, t + 1);
            for (std::size_t i = b; i < e; ++i) f(i);
        };
        bool sleepers = false;
        {
            std::lock_guard lock(mutex_);
            // Type-erased by hand: a function pointer and the lambda's address (no allocation).
            body_ = [](void* ctx, std::size_t t) { (*static_cast<decltype(body)*>(ctx))(t); };
            body_ctx_ = &body;
            parts_ = parts;
            pending_.store(parts - 1, std::memory_order_relaxed);
            error_ = nullptr;
            caller_cpu_.store(detail::current_cpu(), std::memory_order_relaxed);
            shared_cpu_.store(false, std::memory_order_relaxed);
            generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
            sleepers = sleepers_ > 0;
        }
        if (sleepers) wake_.notify_all();  // polling workers see the generation without it
        run_part(0);
        const auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
        if (!(polling_ && detail::poll_for(spin_us_, done))) {
            std::unique_lock lock(mutex_);
            done_.wait(lock, done);
        }
        // Poll next time only if a worker ran on another CPU than the caller this time.
        polling_ = spin_us_ > 0 && !shared_cpu_.load(std::memory_order_relaxed);
        body_ = nullptr;
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

    /// True on a thread that is running a pool task (nested parallel_for runs serially there).
    static bool in_task() { return in_task_flag(); }

private:
    static bool& in_task_flag() {
        thread_local bool flag = false;
        return flag;
    }

    void run_part(std::size_t t) {
        in_task_flag() = true;
        try {
            body_(body_ctx_, t);
        } catch (...) {
            std::lock_guard lock(error_mutex_);
            if (!error_) error_ = std::current_exception();
        }
        in_task_flag() = false;
    }

    void worker_loop(std::size_t t) {
        std::size_t seen = 0;
        bool poll = false;  // whether the last task ran on a CPU of its own
        for (;;) {
            const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
            if (!(poll && detail::poll_for(spin_us_, [&] { return fresh() || stop_flag_.load(std::memory_order_relaxed); }))) {
                std::unique_lock lock(mutex_);
                ++sleepers_;
                wake_.wait(lock, [&] { return stop_ || fresh(); });
                --sleepers_;
            }
            std::size_t parts;
            {
                std::lock_guard lock(mutex_);  // the call's fields were written under it
                if (stop_) return;
                seen = generation_.load(std::memory_order_relaxed);
                parts = parts_;
            }
            if (t >= parts) continue;  // this call uses fewer threads
            const int cpu = detail::current_cpu();
            const bool shared = cpu >= 0 && cpu == caller_cpu_.load(std::memory_order_relaxed);
            if (shared) shared_cpu_.store(true, std::memory_order_relaxed);
            poll = spin_us_ > 0 && !shared;
            run_part(t);
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard lock(mutex_);  // pairs with the caller's wait
                done_.notify_one();
            }
        }
    }

    std::size_t size_;
    std::vector<std::thread> workers_;
    std::mutex call_mutex_, mutex_, error_mutex_;
    std::condition_variable wake_, done_;
    void (*body_)(void*, std::size_t) = nullptr;
    void* body_ctx_ = nullptr;
    std::size_t spin_us_;
    std::size_t parts_ = 0;
    std::size_t sleepers_ = 0;                ///< workers waiting on wake_ (under mutex_)
    std::atomic<std::size_t> generation_{0};  ///< calls so far: written under mutex_, polled without
    std::atomic<std::size_t> pending_{0};
    std::atomic<int> caller_cpu_{-1};         ///< the caller's CPU at the current call
    std::atomic<bool> shared_cpu_{false};     ///< a worker of the current call ran on the caller's CPU
    std::atomic<bool> stop_flag_{false};      ///< stop_, for polling workers
    bool polling_ = true;                     ///< the caller polls for completion (caller's side only)
    std::exception_ptr error_;
    bool stop_ = false;
};

/// Threads for the default pool: OAR_NUM_THREADS when set to a positive integer, else the
/// hardware's count (at least 1). A malformed OAR_NUM_THREADS is an error, not a silent default.
inline std::size_t default_thread_count() {
    if (const char* env = std::getenv("OAR_NUM_THREADS"); env && *env) {
        char* end = nullptr;
        const unsigned long n = std::strtoul(env, &end, 10);
        if (*end != '\0' || n == 0 || n > 4096 || *env == '-')
            throw value_error(std::string("OAR_NUM_THREADS: expected a thread count from 1 to 4096, got \"") + env +
                              "\"");
        return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : hw;
}

namespace detail {
inline std::unique_ptr<ThreadPool>& default_pool_slot() {
    static std::unique_ptr<ThreadPool> pool = std::make_unique<ThreadPool>(default_thread_count());
    return pool;
}
}  // namespace detail

/// The process-wide pool the CPU kernels use, created on first use.
inline ThreadPool& default_pool() { return *detail::default_pool_slot(); }

/// Replaces the default pool with one of `threads` threads (as torch::set_num_threads). Call it
/// between steps, never while a kernel runs on the default pool.
inline void set_num_threads(std::size_t threads) {
    auto fresh = std::make_unique<ThreadPool>(threads);  // throws value_error for 0, pool untouched
    detail::default_pool_slot().swap(fresh);
}

}  // namespace oar
