// A callback with no hook fit knows (a misspelt on_epoch_ends) is refused, not silently ignored.
// expect: oar: each of fit's callbacks needs at least one hook
#include <oar/oar.hpp>
#include <oar/train/model.hpp>

struct Misspelt {
    void on_epoch_ends(const oar::Logs&) {}
};

using Net = oar::Network<oar::Sequential<oar::Flatten, oar::Linear<4, 2>>, oar::Shape<1, 2, 2>>;

void f(Net& net, oar::SGD<>& opt, const oar::data::InMemoryDataset& set) {
    oar::Model model(net);
    model.prepare(opt);
    model.fit(set, {.epochs = 1}, Misspelt{});
}
