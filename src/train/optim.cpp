// The trainer's optimizer: torch::optim::AdamW (plain Adam when weight_decay is 0), and its state as
// bytes for checkpoints. The only trainer file that includes LibTorch's C++ frontend (slow to compile).
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <sstream>

#include "train/trainer.hpp"
#include "vocablens/error.hpp"

namespace vocablens::train_detail {

struct Optimizer::Impl {
  std::unique_ptr<torch::optim::AdamW> opt;
};

Optimizer::Optimizer(const std::map<std::string, at::Tensor>& params, const TrainOptions& o) : impl_(new Impl) {
  // Two groups: matrices (weight decay) and vectors (none), each in the map's (name) order.
  std::vector<torch::Tensor> mats, vecs;
  for (auto& [name, p] : params) (p.dim() >= 2 ? mats : vecs).push_back(p);
  auto base = torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!mats.empty())
    groups.emplace_back(
        mats, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(base).weight_decay(o.weight_decay)));
  if (!vecs.empty())
    groups.emplace_back(vecs, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(base).weight_decay(0.0)));
  impl_->opt = std::make_unique<torch::optim::AdamW>(std::move(groups), base.weight_decay(0.0));
}

Optimizer::~Optimizer() = default;

void Optimizer::zero_grad() { impl_->opt->zero_grad(); }

void Optimizer::step(double lr) {
  for (auto& g : impl_->opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  impl_->opt->step();
}

std::string Optimizer::save() const {
  std::ostringstream ss;
  torch::save(*impl_->opt, ss);
  return ss.str();
}

void Optimizer::load(const std::string& bytes, const std::string& path) {
  std::istringstream ss(bytes);
  try {
    torch::load(*impl_->opt, ss);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw FormatError(path, "cannot restore the optimizer state: " + msg.substr(0, msg.find('\n')));
  }
}

double clip_grad_norm(const std::map<std::string, at::Tensor>& params, double max_norm) {
  double total = 0;
  for (auto& kv : params) {
    const at::Tensor& g = kv.second.grad();
    if (g.defined()) total += g.to(at::kDouble).pow(2).sum().item<double>();
  }
  total = std::sqrt(total);
  if (max_norm > 0 && total > max_norm) {
    const double scale = max_norm / (total + 1e-6);
    for (auto& kv : params) {
      at::Tensor g = kv.second.grad();
      if (g.defined()) g.mul_(scale);
    }
  }
  return total;
}

}  // namespace vocablens::train_detail
