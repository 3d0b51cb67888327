// Tests of include/oar/nn/summary.hpp on the course CNN and a small MLP: every layer's row (name,
// output shape, parameter count, FLOPs) and the totals, all recomputed here from the layer
// formulas (a multiply-add counts 2 FLOPs, a bias add 1, ReLU 1 per element, a max-pool window
// K*K comparisons per output).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>  // std::size_t
#include <iomanip>  // std::setprecision
#include <sstream>  // std::istringstream
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/layers/activation.hpp>  // ReLU, Tanh
#include <oar/layers/conv2d.hpp>      // Conv2D
#include <oar/layers/flatten.hpp>     // Flatten
#include <oar/layers/linear.hpp>      // Linear
#include <oar/layers/pool2d.hpp>      // MaxPool2D
#include <oar/models/course.hpp>      // course::CNN
#include <oar/nn/network.hpp>         // Network, Sequential
#include <oar/nn/summary.hpp>         // under test
#include <oar/layers/batch_norm.hpp>  // BatchNorm2D
#include <oar/nn/blocks.hpp>          // Residual

namespace {

using SummaryCNN = oar::Network<oar::course::CNN, oar::course::Image>;

/// 4782410 -> "4,782,410", written independently of oar's helper.
std::string grouped(std::size_t v) {
    std::string s;
    int digits = 0;
    do {
        if (digits > 0 && digits % 3 == 0) s.insert(s.begin(), ',');
        s.insert(s.begin(), static_cast<char>('0' + v % 10));
        v /= 10;
        ++digits;
    } while (v > 0);
    return s;
}

std::string fixed2(double v) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(2) << v;
    return os.str();
}

struct Row {
    std::string index, name, shape, params, flops;
};

/// The table rows after the "=====" line that opens the body, until the next "=====" line.
std::vector<Row> rows_of(const std::string& table) {
    std::vector<Row> rows;
    std::istringstream in(table);
    std::string line;
    int rules = 0;
    while (std::getline(in, line)) {
        if (line.rfind("=====", 0) == 0) {
            if (++rules == 2) break;
            continue;
        }
        if (rules != 1) continue;
        const auto open = line.find('['), close = line.find(']');
        REQUIRE(open != std::string::npos);
        REQUIRE(close != std::string::npos);
        Row r;
        std::istringstream head(line.substr(0, open));
        head >> r.index >> r.name;
        r.shape = line.substr(open, close - open + 1);
        std::istringstream tail(line.substr(close + 1));
        tail >> r.params >> r.flops;
        rows.push_back(r);
    }
    return rows;
}

bool has_line(const std::string& table, const std::string& line) {
    return ("\n" + table).find("\n" + line + "\n") != std::string::npos;
}

/// Output size of a convolution or pooling window along one axis.
constexpr std::size_t out_size(std::size_t in, std::size_t k, std::size_t stride, std::size_t pad) {
    return (in + 2 * pad - k) / stride + 1;
}

}  // namespace

TEST_CASE("summary of the course CNN lists every layer with its output shape, parameters and FLOPs") {
    // Shapes by the convolution arithmetic.
    const std::size_t h1 = out_size(28, 5, 1, 2), p1 = out_size(h1, 2, 2, 0);
    const std::size_t h2 = out_size(p1, 5, 1, 2), p2 = out_size(h2, 2, 2, 0);
    REQUIRE(h1 == 28);
    REQUIRE(p1 == 14);
    REQUIRE(h2 == 14);
    REQUIRE(p2 == 7);
    const std::size_t flat = 20 * p2 * p2;
    REQUIRE(flat == 980);

    // Parameters: weight + bias.
    const std::size_t conv1_params = 20 * 1 * 5 * 5 + 20, conv2_params = 20 * 20 * 5 * 5 + 20,
                      fc_params = flat * 10 + 10;
    CHECK(conv1_params == 520);
    CHECK(conv2_params == 10020);
    CHECK(fc_params == 9810);

    // FLOPs per sample.
    const std::vector<std::size_t> flops{
        20 * h1 * h1 * (2 * 1 * 5 * 5 + 1),   // conv1: a dot product of 25 and a bias per output
        20 * h1 * h1,                         // relu
        20 * p1 * p1 * 2 * 2,                 // max pool 2x2
        20 * h2 * h2 * (2 * 20 * 5 * 5 + 1),  // conv2
        20 * h2 * h2,                         // relu
        20 * p2 * p2 * 2 * 2,                 // max pool
        0,                                    // flatten: a copy
        2 * flat * 10 + 10,                   // linear
    };
    std::size_t total_flops = 0;
    for (auto f : flops) total_flops += f;

    const std::vector<Row> expected{
        {"0", "Conv2D", "[N, 20, 28, 28]", grouped(conv1_params), grouped(flops[0])},
        {"1", "ReLU", "[N, 20, 28, 28]", "0", grouped(flops[1])},
        {"2", "MaxPool2D", "[N, 20, 14, 14]", "0", grouped(flops[2])},
        {"3", "Conv2D", "[N, 20, 14, 14]", grouped(conv2_params), grouped(flops[3])},
        {"4", "ReLU", "[N, 20, 14, 14]", "0", grouped(flops[4])},
        {"5", "MaxPool2D", "[N, 20, 7, 7]", "0", grouped(flops[5])},
        {"6", "Flatten", "[N, 980]", "0", "0"},
        {"7", "Linear", "[N, 10]", grouped(fc_params), grouped(flops[7])},
    };

    const std::string table = oar::summary<SummaryCNN>();
    INFO(table);
    const std::vector<Row> rows = rows_of(table);
    REQUIRE(rows.size() == expected.size() + 1);
    CHECK(rows[0].name == "Input");
    CHECK(rows[0].shape == "[N, 1, 28, 28]");
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const Row& got = rows[i + 1];
        const Row& want = expected[i];
        INFO("layer ", i);
        CHECK(got.index == want.index);
        CHECK(got.name == want.name);
        CHECK(got.shape == want.shape);
        CHECK(got.params == want.params);
        CHECK(got.flops == want.flops);
    }

    const std::size_t total = conv1_params + conv2_params + fc_params;
    CHECK(total == 20350);
    CHECK(has_line(table, "Total params: 20,350"));
    CHECK(has_line(table, "Trainable params: 20,350"));
    CHECK(has_line(table, "Non-trainable params: 0"));
    CHECK(total_flops == 4782410);
    CHECK(has_line(table, "Forward FLOPs per sample: " + grouped(total_flops) + " (4.78 MFLOP)"));

    // Activations kept for backward: the input and every layer's output, 4 bytes each.
    //  input, conv1 + relu, pool1, conv2 + relu, pool2 + flatten, linear
    const std::size_t act = 784 + 2 * 20 * h1 * h1 + 20 * p1 * p1 + 2 * 20 * h2 * h2 + 2 * flat + 10;
    CHECK(has_line(table, "Activations per sample: " + grouped(act * 4) + " bytes (" +
                              fixed2(static_cast<double>(act * 4) / 1024.0) + " KB)"));
    CHECK(has_line(table, "Params size: 79.49 KB"));  // 20350 * 4 / 1024 = 79.492...
}

TEST_CASE("the summary's parameter total is the number of trainable scalars the network holds") {
    const SummaryCNN net(1);
    CHECK(net.parameters().count() == 20350);
    CHECK(oar::summary(net) == oar::summary<SummaryCNN>());
    std::size_t from_rows = 0;
    for (const Row& r : rows_of(oar::summary(net))) {
        std::string digits;
        for (char c : r.params)
            if (c != ',') digits += c;
        if (!digits.empty()) from_rows += std::stoul(digits);
    }
    CHECK(from_rows == net.parameters().count());
}

TEST_CASE("summary of a small MLP has one row per layer and the right totals") {
    using Mlp = oar::Network<oar::Sequential<oar::Linear<4, 3>, oar::Tanh, oar::Linear<3, 2>>, oar::Shape<4>>;
    const std::string table = oar::summary<Mlp>();
    INFO(table);
    const auto rows = rows_of(table);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].shape == "[N, 4]");
    CHECK(rows[1].name == "Linear");
    CHECK(rows[1].shape == "[N, 3]");
    CHECK(rows[1].params == "15");                        // 4*3 + 3
    CHECK(rows[1].flops == std::to_string(2 * 4 * 3 + 3));
    CHECK(rows[2].name == "Tanh");
    CHECK(rows[2].params == "0");
    CHECK(rows[3].params == "8");                         // 3*2 + 2
    CHECK(has_line(table, "Total params: 23"));
    CHECK(has_line(table, "Forward FLOPs per sample: " + std::to_string(27 + 3 + 14) + " (0.00 MFLOP)"));
}

TEST_CASE("the thousands grouping used by summary matches an independent one") {
    for (std::size_t v : {0ul, 7ul, 999ul, 1000ul, 20350ul, 999999ul, 1000000ul, 4782410ul, 18446744073709551615ul})
        CHECK(oar::detail::thousands(v) == grouped(v));
}

TEST_CASE("summary sizes its columns from the content: long layer names and nested blocks stay aligned") {
    using Body = oar::Sequential<oar::Conv2D<4, 4, 3, 1, 1>, oar::BatchNorm2D<4>, oar::ReLU>;
    using Net = oar::Network<oar::Sequential<oar::Conv2D<3, 4, 3, 1, 1>, oar::Residual<oar::Residual<Body>>,
                                             oar::AdaptiveAvgPool2D<1, 1>, oar::Flatten, oar::Linear<4, 1000000>>,
                             oar::Shape<3, 8, 8>>;
    const std::string table = oar::summary<Net>();
    std::vector<std::string> lines;
    std::istringstream in(table);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    // The header, then the input and layer rows between the two '=' rules.
    std::size_t header = 0;
    while (header < lines.size() && lines[header].find("Layer (type)") == std::string::npos) ++header;
    REQUIRE(header + 2 < lines.size());
    REQUIRE(lines[header + 1].find_first_not_of('=') == std::string::npos);
    const std::size_t name_col = lines[header].find("Layer (type)"), shape_col = lines[header].find("Output Shape"),
                      param_col = lines[header].find("Param #");
    std::size_t rows = 0;
    bool saw_long = false, saw_deep = false;
    for (std::size_t i = header + 2; i < lines.size() && lines[i].find_first_not_of('=') != std::string::npos; ++i) {
        const std::string& l = lines[i];
        INFO(l);
        ++rows;
        CHECK(l.size() == lines[header].size());  // FLOPs right-aligned to one edge
        REQUIRE(l.size() > param_col);
        CHECK(l[name_col - 1] == ' ');
        CHECK(l[name_col] != ' ');  // the name starts in its column
        CHECK(l.compare(shape_col - 1, 4, " [N,") == 0);
        CHECK(l[param_col - 1] == ' ');
        saw_long = saw_long || l.find(" AdaptiveAvgPool2D ") != std::string::npos;
        saw_deep = saw_deep || l.find("    1.body.0.body.1 ") != std::string::npos;
    }
    CHECK(rows == 1 + 5 + 1 + 3);  // the input; five layers; the inner Residual and its three layers
    CHECK(saw_long);
    CHECK(saw_deep);
    CHECK(lines[header].size() > 72);  // wider than the old fixed table
    CHECK(lines[header + 1].size() == lines[header].size());  // the rules as wide as the rows
}
