// Operation tags: every kernel oar dispatches, by name, with the shape of what it computes. Each
// backend's kernel headers document the signature of `kernel<op::X, B>::run` for their ops
// (docs/ARCHITECTURE.md, "The seam").
#pragma once

namespace oar::op {

// GEMM and convolution
struct gemm {};                  // C = alpha * op(A) * op(B) + beta * C
struct gemm_bf16 {};             // gemm on operands rounded to bf16, fp32 sums (the bf16_mixed policy off the CPU)
struct im2col {};                // one sample's (C,H,W) -> (C*K*K, OH*OW)
struct im2row {};                // one sample's (C,H,W) -> (OH*OW, C*K*K), the transpose of im2col
struct col2im {};                // adjoint of im2col, accumulating into (C,H,W)
struct conv2d_forward {};        // whole batch: y = conv(x, w) + b
struct conv2d_backward {};       // whole batch: dw += .., db += .., dx = .. (optional)
struct conv2d_forward_relu {};   // whole batch: y = max(conv(x, w) + b, 0)
struct conv2d_backward_relu {};  // conv2d_backward of a convolution followed by a ReLU (dy masked in place)
struct conv2d_forward_map {};    // whole batch: z = conv(x, w) + b, y = f(z * scale[c] + shift[c]) (or f(z)): the tail in the epilogue

// bias
struct bias_add {};   // y[n, c, p] += b[c]
struct bias_relu {};  // y[n, c, p] = max(y[n, c, p] + b[c], 0): bias_add then a fused ReLU
struct bias_map {};   // z[n, c, p] += b[c]; y = f(z * scale[c] + shift[c]) (or f(z)): a producer's elementwise tail
struct bias_grad {};  // db[c] += sum_{n,p} dy[n, c, p]

// pooling
struct max_pool_forward {};
struct max_pool_backward {};
struct avg_pool_forward {};
struct avg_pool_backward {};
struct adaptive_avg_pool_forward {};   // y (n, C, OH, OW) = the means of the adaptive windows
struct adaptive_avg_pool_backward {};  // dx (n, C, H, W) = sum over the windows holding it of dy / area

// elementwise
struct map {};           // y[i] = f(x[i])
struct map_backward {};  // dx[i] = f.backward(x[i], y[i], dy[i])
struct relu_mask {};     // dy[i] = y[i] > 0 ? dy[i] : 0, in place (y: a ReLU's output)
struct dropout {};       // out[i] = u(stream, i) < p ? 0 : in[i] * scale (a counter-based mask)
struct scale_down {};    // x[i] /= d, in place (gradient averaging over ranks)

// joining tensors (blocks)
struct add {};        // y[i] = a[i] + b[i] (y may be a or b): Residual's sum, gradients of a shared input
struct add_relu {};   // y[i] = max(a[i] + b[i], 0): a Residual's sum and the ReLU after it (CPU)
struct copy_rows {};  // dst[r * dst_stride + j] = src[r * src_stride + j], j < len: Concat's slices

// normalisation
struct batch_norm_forward {};   // per channel: batch (train) or running (eval) statistics; running ones updated in train
struct batch_norm_backward {};  // dx, and dgamma / dbeta added
struct batch_norm_forward_relu {};   // batch_norm_forward, then a ReLU, in one pass (CPU)
struct batch_norm_backward_relu {};  // the ReLU's mask on dy (in place) with batch_norm_backward's pass (CPU)
struct batch_norm_fold {};      // eval mode as y = x * scale[c] + shift[c]: the scale and shift from the running statistics

// softmax and loss
struct softmax_forward {};        // rows of y = softmax(rows of x)
struct softmax_backward {};       // dx = y * (dy - sum(dy * y)) per row
struct softmax_cross_entropy {};  // fused: loss and d(loss)/d(logits) for integer labels

// optimizers
struct fused_update {};  // f(p[i], g[i], s1[i], s2[i]) over the flat parameter buffer

}  // namespace oar::op
