// Tests of include/oar/core/thread_pool.hpp: every task runs exactly once on its static chunk,
// nesting runs serially, exceptions come back to the caller, OAR_NUM_THREADS is honoured; polling
// and sleeping workers (OAR_POOL_SPIN_US) give the same results whatever the gaps between calls.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <atomic>     // std::atomic
#include <chrono>     // std::chrono: gaps between calls
#include <cstddef>    // std::size_t
#include <cstdlib>    // setenv, unsetenv
#include <stdexcept>  // std::runtime_error
#include <thread>     // std::this_thread::get_id
#include <vector>     // std::vector

#include <oar/core/thread_pool.hpp>  // under test

TEST_CASE("parallel_for runs every task exactly once, for any task count and pool size") {
    for (std::size_t threads : {1u, 2u, 3u, 5u}) {
        oar::ThreadPool pool(threads);
        CHECK(pool.size() == threads);
        for (std::size_t tasks : {0u, 1u, 2u, 3u, 7u, 64u, 1001u}) {
            std::vector<std::atomic<int>> hits(tasks);
            pool.parallel_for(tasks, [&](std::size_t i) { hits[i].fetch_add(1); });
            for (std::size_t i = 0; i < tasks; ++i) CHECK(hits[i].load() == 1);
        }
    }
}

TEST_CASE("static chunks are contiguous, cover the range and differ in size by at most one") {
    for (std::size_t parts : {1u, 2u, 3u, 4u, 7u})
        for (std::size_t tasks : {7u, 8u, 100u, 101u}) {
            CHECK(oar::ThreadPool::chunk_begin(tasks, parts, 0) == 0);
            CHECK(oar::ThreadPool::chunk_begin(tasks, parts, parts) == tasks);
            for (std::size_t t = 0; t < parts; ++t) {
                const std::size_t len =
                    oar::ThreadPool::chunk_begin(tasks, parts, t + 1) - oar::ThreadPool::chunk_begin(tasks, parts, t);
                CHECK((len == tasks / parts || len == tasks / parts + 1));
            }
        }
}

TEST_CASE("a pool of two threads runs tasks on two different threads") {
    oar::ThreadPool pool(2);
    std::vector<std::thread::id> ids(2);
    pool.parallel_for(2, [&](std::size_t i) { ids[i] = std::this_thread::get_id(); });
    CHECK(ids[0] == std::this_thread::get_id());  // the caller takes the first chunk
    CHECK(ids[1] != ids[0]);
}

TEST_CASE("a parallel_for inside a task runs serially on that task's thread") {
    oar::ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(3 * 4);
    std::atomic<int> wrong_thread{0};
    pool.parallel_for(3, [&](std::size_t i) {
        CHECK(oar::ThreadPool::in_task());
        const auto outer = std::this_thread::get_id();
        pool.parallel_for(4, [&](std::size_t j) {
            if (std::this_thread::get_id() != outer) wrong_thread.fetch_add(1);
            hits[i * 4 + j].fetch_add(1);
        });
    });
    CHECK(!oar::ThreadPool::in_task());
    CHECK(wrong_thread.load() == 0);
    for (auto& h : hits) CHECK(h.load() == 1);
}

TEST_CASE("an exception thrown by a task reaches the caller, and the pool keeps working") {
    oar::ThreadPool pool(2);
    CHECK_THROWS_WITH_AS(pool.parallel_for(10,
                                           [](std::size_t i) {
                                               if (i == 9) throw std::runtime_error("task 9 failed");
                                           }),
                         "task 9 failed", std::runtime_error);
    std::atomic<int> n{0};
    pool.parallel_for(10, [&](std::size_t) { n.fetch_add(1); });
    CHECK(n.load() == 10);
}

TEST_CASE("many short parallel_for calls in a row all complete (no lost wake-ups)") {
    oar::ThreadPool pool(2);
    long total = 0;
    std::vector<long> part(2);
    for (int round = 0; round < 20000; ++round) {
        pool.parallel_for(2, [&](std::size_t i) { part[i] = round + static_cast<long>(i); });
        total += part[0] + part[1];
    }
    CHECK(total == 2L * (19999L * 20000L / 2) + 20000L);
}

TEST_CASE("OAR_NUM_THREADS sets the default thread count and a malformed value is a clear error") {
    setenv("OAR_NUM_THREADS", "3", 1);
    CHECK(oar::default_thread_count() == 3);
    for (const char* bad : {"0", "two", "-1", "3x"}) {
        setenv("OAR_NUM_THREADS", bad, 1);
        CHECK_THROWS_WITH_AS(oar::default_thread_count(),
                             doctest::Contains("OAR_NUM_THREADS: expected a thread count"),
                             oar::value_error);
    }
    unsetenv("OAR_NUM_THREADS");
    CHECK(oar::default_thread_count() >= 1);
    CHECK_THROWS_AS(oar::ThreadPool(0), oar::value_error);
}

TEST_CASE("set_num_threads replaces the default pool, and rejects zero threads keeping the old one") {
    oar::set_num_threads(3);
    CHECK(oar::default_pool().size() == 3);
    CHECK_THROWS_AS(oar::set_num_threads(0), oar::value_error);
    CHECK(oar::default_pool().size() == 3);
    oar::set_num_threads(1);
    CHECK(oar::default_pool().size() == 1);
}

TEST_CASE("polling and sleeping workers run every call, with gaps shorter and longer than the polling budget") {
    using namespace std::chrono_literals;
    for (std::size_t spin : {0u, 200u, 5000u}) {
        INFO("spin_us=" << spin);
        oar::ThreadPool pool(3, spin);
        CHECK(pool.spin_us() == spin);
        long total = 0, want = 0;
        std::vector<long> part(4);  // task i's own slot: tasks of one call run on different threads
        for (int round = 0; round < 300; ++round) {
            // no gap, a gap inside the budget, one past it (the workers went to sleep)
            if (round % 3 == 1) std::this_thread::sleep_for(50us);
            if (round % 50 == 2) std::this_thread::sleep_for(8ms);
            const std::size_t tasks = 1 + static_cast<std::size_t>(round % 4);  // calls using fewer threads too
            pool.parallel_for(tasks, [&](std::size_t i) { part[i] += round + static_cast<long>(i); });
            for (std::size_t i = 0; i < tasks; ++i) want += round + static_cast<long>(i);
        }
        for (long p : part) total += p;
        CHECK(total == want);
        CHECK_THROWS_AS(pool.parallel_for(3, [](std::size_t i) { if (i == 2) throw std::runtime_error("x"); }),
                        std::runtime_error);
        std::atomic<int> n{0};
        pool.parallel_for(3, [&](std::size_t) { n.fetch_add(1); });
        CHECK(n.load() == 3);
    }  // destroyed while its workers poll: they stop
}

TEST_CASE("OAR_POOL_SPIN_US sets the polling budget and a malformed value is a clear error") {
    setenv("OAR_POOL_SPIN_US", "0", 1);
    CHECK(oar::default_pool_spin_us() == 0);
    CHECK(oar::ThreadPool(2).spin_us() == 0);
    setenv("OAR_POOL_SPIN_US", "250", 1);
    CHECK(oar::default_pool_spin_us() == 250);
    for (const char* bad : {"-1", "fast", "10us", "2000000"}) {
        setenv("OAR_POOL_SPIN_US", bad, 1);
        CHECK_THROWS_WITH_AS(oar::default_pool_spin_us(), doctest::Contains("OAR_POOL_SPIN_US: expected microseconds"),
                             oar::value_error);
    }
    unsetenv("OAR_POOL_SPIN_US");
    CHECK(oar::default_pool_spin_us() == 300);
}
