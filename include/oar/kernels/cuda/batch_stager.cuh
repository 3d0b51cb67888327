// BatchStager: host-to-device batch copies overlapped with compute, for a training loop that feeds
// a network on the GPU (Network::forward_device): two pinned host slots and two device slots, the
// uploads on a non-blocking copy stream ordered with the compute stream by events.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <cstring>  // std::memcpy into pinned memory

#include "../../core/error.hpp"  // value_error
#include "runtime.cuh"           // device_buffer, pinned_buffer, Stream, Event, compute_stream

namespace oar {

/// Host-to-device batch copies overlapped with compute: two pinned host slots and two device
/// slots; stage() copies a batch into pinned memory and queues its upload on a non-blocking copy
/// stream while the compute stream is still busy with the previous batch; take() makes the
/// compute stream wait for that upload and returns the device pointers.
class BatchStager {
public:
    BatchStager(std::size_t max_batch, std::size_t sample_floats)
        : max_batch_(max_batch), sample_(sample_floats) {
        for (int s = 0; s < 2; ++s) {
            host_x_[s] = cuda_runtime::pinned_buffer<float>(max_batch * sample_floats);
            host_y_[s] = cuda_runtime::pinned_buffer<std::int64_t>(max_batch);
            dev_x_[s] = cuda_runtime::device_buffer<float>(max_batch * sample_floats);
            dev_y_[s] = cuda_runtime::device_buffer<std::int64_t>(max_batch);
        }
    }

    /// Queues the upload of n samples into the next slot. The slot's previous batch must have been
    /// used: its upload is waited for, and the copy stream waits for the compute work queued so far.
    void stage(const float* images, const std::int64_t* labels, std::size_t n) {
        if (n == 0 || n > max_batch_)
            throw value_error(detail::concat("BatchStager::stage: batch of ", n, " samples, expected 1..", max_batch_));
        const int s = next_;
        uploaded_[s].synchronize();  // the pinned slot is free again
        std::memcpy(host_x_[s].data(), images, n * sample_ * sizeof(float));
        std::memcpy(host_y_[s].data(), labels, n * sizeof(std::int64_t));
        consumed_[s].record(cuda_runtime::compute_stream());
        consumed_[s].make_wait(copy_.get());  // the device slot is no longer read by earlier steps
        OAR_CUDA_CHECK(cudaMemcpyAsync(dev_x_[s].data(), host_x_[s].data(), n * sample_ * sizeof(float),
                                       cudaMemcpyHostToDevice, copy_.get()));
        OAR_CUDA_CHECK(cudaMemcpyAsync(dev_y_[s].data(), host_y_[s].data(), n * sizeof(std::int64_t),
                                       cudaMemcpyHostToDevice, copy_.get()));
        uploaded_[s].record(copy_.get());
        count_[s] = n;
        next_ = 1 - s;
    }

    struct Batch {
        const float* images;
        const std::int64_t* labels;
        std::size_t count;
    };
    /// The oldest staged batch; compute work queued after this call sees its data.
    Batch take() {
        const int s = take_;
        uploaded_[s].make_wait(cuda_runtime::compute_stream());
        take_ = 1 - s;
        return {dev_x_[s].data(), dev_y_[s].data(), count_[s]};
    }

private:
    std::size_t max_batch_, sample_;
    cuda_runtime::pinned_buffer<float> host_x_[2];
    cuda_runtime::pinned_buffer<std::int64_t> host_y_[2];
    cuda_runtime::device_buffer<float> dev_x_[2];
    cuda_runtime::device_buffer<std::int64_t> dev_y_[2];
    cuda_runtime::Stream copy_;
    cuda_runtime::Event uploaded_[2], consumed_[2];
    std::size_t count_[2] = {0, 0};
    int next_ = 0, take_ = 0;
};

}  // namespace oar
