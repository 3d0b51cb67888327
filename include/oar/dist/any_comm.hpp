// AnyComm: a Communicator chosen at run time (LocalComm, MpiComm, ...), as init_parallel_env
// hands one back: the same program runs alone or under mpirun without being recompiled.
// One virtual call per collective, negligible beside the collective itself.
#pragma once

#include <memory>       // std::unique_ptr
#include <type_traits>  // std::is_same_v, std::remove_cvref_t
#include <span>         // std::span
#include <utility>      // std::move

#include "communicator.hpp"  // Communicator, AsyncCommunicator
#include "local_comm.hpp"    // LocalComm: the default

namespace oar::dist {

class AnyComm {
public:
    /// A LocalComm.
    AnyComm() : AnyComm(LocalComm{}) {}
    /// Takes ownership of `c` (MpiComm is move-only).
    template <Communicator C>
        requires(!std::is_same_v<std::remove_cvref_t<C>, AnyComm>)
    explicit AnyComm(C c) : p_(std::make_unique<Model<C>>(std::move(c))) {}

    int rank() const { return p_->rank(); }
    int world_size() const { return p_->world_size(); }
    void allreduce_sum(std::span<float> x) { p_->allreduce_sum(x); }
    void allreduce_sum(std::span<double> x) { p_->allreduce_sum(x); }
    void allreduce_average(std::span<float> x) { p_->allreduce_average(x); }
    void allreduce_average(std::span<double> x) { p_->allreduce_average(x); }
    void broadcast(std::span<float> x, int root) { p_->broadcast(x, root); }
    void broadcast(std::span<double> x, int root) { p_->broadcast(x, root); }
    void barrier() { p_->barrier(); }
    /// Non-blocking where the engine has it (MpiComm); elsewhere start_allreduce_sum reduces at
    /// once and progress / wait_all have nothing to do.
    void start_allreduce_sum(std::span<float> x) { p_->start_allreduce_sum(x); }
    void start_allreduce_sum(std::span<double> x) { p_->start_allreduce_sum(x); }
    void progress() { p_->progress(); }
    void wait_all() { p_->wait_all(); }

private:
    struct Base {
        virtual ~Base() = default;
        virtual int rank() const = 0;
        virtual int world_size() const = 0;
        virtual void allreduce_sum(std::span<float>) = 0;
        virtual void allreduce_sum(std::span<double>) = 0;
        virtual void allreduce_average(std::span<float>) = 0;
        virtual void allreduce_average(std::span<double>) = 0;
        virtual void broadcast(std::span<float>, int) = 0;
        virtual void broadcast(std::span<double>, int) = 0;
        virtual void barrier() = 0;
        virtual void start_allreduce_sum(std::span<float>) = 0;
        virtual void start_allreduce_sum(std::span<double>) = 0;
        virtual void progress() = 0;
        virtual void wait_all() = 0;
    };
    template <class C>
    struct Model final : Base {
        explicit Model(C&& c) : comm(std::move(c)) {}
        int rank() const override { return comm.rank(); }
        int world_size() const override { return comm.world_size(); }
        void allreduce_sum(std::span<float> x) override { comm.allreduce_sum(x); }
        void allreduce_sum(std::span<double> x) override { comm.allreduce_sum(x); }
        void allreduce_average(std::span<float> x) override { comm.allreduce_average(x); }
        void allreduce_average(std::span<double> x) override { comm.allreduce_average(x); }
        void broadcast(std::span<float> x, int root) override { comm.broadcast(x, root); }
        void broadcast(std::span<double> x, int root) override { comm.broadcast(x, root); }
        void barrier() override { comm.barrier(); }
        void start_allreduce_sum(std::span<float> x) override { start(x); }
        void start_allreduce_sum(std::span<double> x) override { start(x); }
        void progress() override {
            if constexpr (AsyncCommunicator<C>) comm.progress();
        }
        void wait_all() override {
            if constexpr (AsyncCommunicator<C>) comm.wait_all();
        }
        template <class T>
        void start(std::span<T> x) {
            if constexpr (AsyncCommunicator<C>) comm.start_allreduce_sum(x);
            else comm.allreduce_sum(x);
        }
        C comm;
    };
    std::unique_ptr<Base> p_;
};

static_assert(AsyncCommunicator<AnyComm>);

}  // namespace oar::dist
