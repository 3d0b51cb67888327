// Metrics for oar::Model: the MetricType concept (update / accumulate / reset, as
// paddle.metric.Metric), Metric (a named metric of any such type, held by value) and
// top_k_accuracy (Accuracy named "acc" / "acc_top5" as Paddle names it).
#pragma once

#include <concepts>  // std::convertible_to
#include <cstddef>   // std::size_t
#include <cstdint>   // std::int64_t
#include <memory>    // std::unique_ptr: a metric's holder
#include <span>      // std::span: labels
#include <string>    // std::string, std::to_string
#include <utility>   // std::move

#include "../core/error.hpp"   // value_error
#include "../core/tensor.hpp"  // TensorView
#include "accuracy.hpp"        // Accuracy: top_k_accuracy

namespace oar {

/// MetricType: update(output, labels) adds a batch (returns its value), accumulate() the value so
/// far, reset() starts again (paddle.metric.Metric).
template <class M>
concept MetricType = requires(M& m, const M& cm, TensorView out, std::span<const std::int64_t> labels) {
    m.update(out, labels);
    { cm.accumulate() } -> std::convertible_to<double>;
    m.reset();
};

/// A named metric of any MetricType, held by value (copies are independent).
class Metric {
public:
    template <MetricType M>
    Metric(std::string name, M m) : name_(std::move(name)), impl_(std::make_unique<holder<M>>(std::move(m))) {
        if (name_.empty()) throw value_error("Metric: the name is empty");
    }
    Metric(const Metric& o) : name_(o.name_), impl_(o.impl_->clone()) {}
    Metric(Metric&&) noexcept = default;
    Metric& operator=(Metric o) noexcept {
        name_ = std::move(o.name_);
        impl_ = std::move(o.impl_);
        return *this;
    }
    ~Metric() = default;

    const std::string& name() const { return name_; }
    void update(TensorView out, std::span<const std::int64_t> labels) { impl_->update(out, labels); }
    double accumulate() const { return impl_->accumulate(); }
    void reset() { impl_->reset(); }

private:
    struct base {
        virtual ~base() = default;
        virtual std::unique_ptr<base> clone() const = 0;
        virtual void update(TensorView, std::span<const std::int64_t>) = 0;
        virtual double accumulate() const = 0;
        virtual void reset() = 0;
    };
    template <class M>
    struct holder final : base {
        explicit holder(M x) : m(std::move(x)) {}
        std::unique_ptr<base> clone() const override { return std::make_unique<holder>(m); }
        void update(TensorView o, std::span<const std::int64_t> l) override { m.update(o, l); }
        double accumulate() const override { return static_cast<double>(m.accumulate()); }
        void reset() override { m.reset(); }
        M m;
    };
    std::string name_;
    std::unique_ptr<base> impl_;
};

/// Top-k accuracy named as Paddle names it: "acc" for k = 1, "acc_top5" for k = 5.
inline Metric top_k_accuracy(std::size_t k = 1) {
    if (k == 0) throw value_error("top_k_accuracy: k must be at least 1");
    return Metric(k == 1 ? std::string("acc") : "acc_top" + std::to_string(k), Accuracy(k));
}

}  // namespace oar
