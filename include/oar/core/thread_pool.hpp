// A small persistent thread pool for the CPU kernels: `size()` threads (the caller counts as one),
// and `parallel_for(tasks, f)` running f(task) for every task in [0, tasks) with a static split
// (thread t takes a fixed contiguous range), returning when all are done. Kernels keep their
// results independent of the thread count by giving each task disjoint outputs and reducing in a
// fixed order. A parallel_for called from inside a task runs serially on that thread (no nesting).
// `default_pool()` has OAR_NUM_THREADS threads, else std::thread::hardware_concurrency();
// set_num_threads(n) replaces it.
#pragma once

#include <atomic>              // std::atomic
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

namespace oar {

class ThreadPool {
public:
    /// A pool of `threads` threads in all (>= 1): the caller plus threads - 1 workers.
    explicit ThreadPool(std::size_t threads) : size_(threads) {
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
        }
        wake_.notify_all();
        for (auto& w : workers_) w.join();
    }

    std::size_t size() const { return size_; }

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
        {
            std::lock_guard lock(mutex_);
            // Type-erased by hand: a function pointer and the lambda's address (no allocation).
            body_ = [](void* ctx, std::size_t t) { (*static_cast<decltype(body)*>(ctx))(t); };
            body_ctx_ = &body;
            parts_ = parts;
            pending_.store(parts - 1, std::memory_order_relaxed);
            error_ = nullptr;
            ++generation_;
        }
        wake_.notify_all();
        run_part(0);
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
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
        for (;;) {
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
                if (t >= parts_) continue;  // this call uses fewer threads
            }
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
    std::size_t parts_ = 0;
    std::size_t generation_ = 0;
    std::atomic<std::size_t> pending_{0};
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
