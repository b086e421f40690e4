// Checkpoints: names, round trips of every dtype, the row-major layout of the
// file, loadmodel on every device, strict checks that leave the model alone,
// atomic writes, and optimiser state that resumes training exactly.
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/safetensors.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;
namespace fs = std::filesystem;

namespace {

using flx::testing::TempDir;

struct Encoder {
  Tensor embed;
  Dense proj;
};
FLX_FUNCTOR(Encoder, embed, proj)

std::string error_of(const std::function<void()>& f) { return flx::testing::error_message<CheckpointError>(f); }

using MLP = decltype(Chain(Dense(3, 4, relu), Dense(4, 2)));
MLP mlp() { return Chain(Dense(3, 4, relu), Dense(4, 2)); }

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void spit(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// The raw bytes of every tensor of a model: a refused load must leave each one as it was.
template <class M>
std::vector<std::vector<uint8_t>> parameter_bytes(const M& m) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& [name, t] : state(m)) {
    Tensor c = t.to(Device::cpu());
    const auto* p = static_cast<const uint8_t*>(detail::host_data(c));
    out.emplace_back(p, p + size_t(c.numel()) * dtype_size(c.dtype()));
  }
  return out;
}

// Sets the soft limit of a resource for one scope (the hard limit stays, so
// the old value can be restored without privileges).
struct ScopedLimit {
  int resource;
  rlimit saved{};
  ScopedLimit(int r, rlim_t soft) : resource(r) {
    ::getrlimit(r, &saved);
    rlimit lim = saved;
    lim.rlim_cur = std::min(soft, saved.rlim_max);
    ::setrlimit(r, &lim);
  }
  ~ScopedLimit() { ::setrlimit(resource, &saved); }
};

}  // namespace

TEST(Checkpoints, StateNamesFollowTheFunctorFields) {
  std::vector<std::string> names;
  for (const auto& [name, t] : state(mlp())) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}));
  names.clear();
  for (const auto& [name, t] : state(Encoder{rand(5, 3), Dense(5, 2)})) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "proj.weight", "proj.bias"}));
  Tensor w = rand(2, 2);
  State s = state(mlp());
  EXPECT_EQ(s.at("layers.1.weight").shape(), (Shape{2, 4}));
  EXPECT_THROW(s.at("layers.2.weight"), CheckpointError);
  EXPECT_THROW(s.insert("layers.0.bias", w), ArgumentError);
}

TEST(Checkpoints, EveryDtypeRoundTrips) {
  TempDir tmp;
  State s;
  s.insert("f32", rand(3, 4, 2));
  s.insert("f64", randn(Float64, 5, 3));
  s.insert("f16", rand(3, 2).to(Float16));
  s.insert("bf16", rand(2, 3).to(BFloat16));
  s.insert("i32", tensor(std::vector<int32_t>{1, -2, 3, -4, 5, -6}, {2, 3}));
  s.insert("i64", tensor(std::vector<int64_t>{1LL << 40, -7, 9}, {3}));
  s.insert("u8", tensor(std::vector<uint8_t>{0, 255, 7, 8}, {2, 2}));
  s.insert("bool", tensor(std::vector<bool>{true, false, false, true, true, false}, {3, 2}));
  s.insert("scalar", tensor(std::vector<float>{2.5f}, Shape{}));
  s.insert("empty", zeros(4, 0));
  s.metadata()["note"] = "round trip";
  save(tmp / "all.safetensors", s);
  State r = load(tmp / "all.safetensors");
  ASSERT_EQ(r.size(), s.size());
  EXPECT_EQ(r.metadata().at("note"), "round trip");
  for (const auto& [name, t] : s) {
    const Tensor& u = r.at(name);
    EXPECT_EQ(u.shape(), t.shape()) << name;
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_TRUE(u.device().is_cpu());
    EXPECT_EQ(u.to_vector<double>(), t.to_vector<double>()) << name;
  }
}

TEST(Checkpoints, FilesHoldRowMajorBytesOfTheSameShape) {
  // A Dense weight (out, in) is [out, in] in the file, element [i][j] at
  // i*in + j: what PyTorch's nn.Linear.weight holds.
  TempDir tmp;
  std::vector<float> w;  // column-major (2, 3): w[i, j] = 10 i + j
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i) w.push_back(float(10 * i + j));
  Dense d(tensor(w, {2, 3}), tensor(std::vector<float>{7, 8}, {2}));
  save(tmp / "dense.safetensors", d);
  auto bytes = safetensors::read_file(tmp / "dense.safetensors");
  auto h = safetensors::parse(bytes, "dense");
  bool seen = false;
  for (const auto& e : h.entries) {
    if (e.name != "weight") continue;
    seen = true;
    EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3}));
    const float* p = reinterpret_cast<const float*>(bytes.data() + h.data_start + e.begin);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(p[i * 3 + j], float(10 * i + j));
  }
  EXPECT_TRUE(seen);
}

TEST(Checkpoints, AFailedLoadChangesNothingAndNamesTheKey) {
  TempDir tmp;
  MLP model = mlp();
  const auto before = model(ones(3, 1)).to_vector<float>();
  const auto bytes = parameter_bytes(model);
  auto expect_refused = [&](const State& s, const std::string& phrase) {
    std::string m = error_of([&] { loadmodel(model, s); });
    EXPECT_NE(m.find(phrase), std::string::npos) << m;
    EXPECT_EQ(model(ones(3, 1)).to_vector<float>(), before) << "a refused checkpoint must not touch the model";
    EXPECT_EQ(parameter_bytes(model), bytes) << "a refused checkpoint must not touch the model";
  };
  // Another model: a layer wider. The first tensors fit, so a loader that
  // copied as it checked would have changed them.
  save(tmp / "wide.safetensors", Chain(Dense(3, 4, relu), Dense(4, 3)));
  expect_refused(load(tmp / "wide.safetensors"), "\"layers.1.weight\" has shape (3×4) in the checkpoint but (2×4)");
  State missing = state(mlp());
  State fewer;
  for (const auto& [n, t] : missing)
    if (n != "layers.1.bias") fewer.insert(n, t);
  expect_refused(fewer, "no tensor \"layers.1.bias\"");
  State extra = state(mlp());
  extra.insert("layers.2.weight", rand(2, 2));
  expect_refused(extra, "holds \"layers.2.weight\", which the model has no place for");
  State ints;  // floating types convert as they load; integers never become weights
  for (const auto& [n, t] : state(mlp())) ints.insert(n, t.to(Int32));
  expect_refused(ints, "is Int32 in the checkpoint but Float32 in the model; floating types convert");
  // An optimiser state is not a model.
  save(tmp / "opt.safetensors", setup(Adam(), mlp()));
  expect_refused(load(tmp / "opt.safetensors"), "holds an optimiser state, not a model");
}

TEST(Checkpoints, WritesAreAtomic) {
  TempDir tmp;
  const std::string path = tmp / "m.safetensors";
  MLP a = mlp(), b = mlp();
  save(path, a);
  save(path, b);  // replaced whole
  EXPECT_EQ(tmp.count(), 1u) << "no temporary file is left behind";
  MLP c = mlp();
  loadmodel(c, load(path));
  EXPECT_EQ(c(ones(3, 2)).to_vector<float>(), b(ones(3, 2)).to_vector<float>());
  // Writing where it cannot: an error naming the path, the old file intact.
  EXPECT_THROW(save(tmp / "no/such/dir/m.safetensors", a), CheckpointError);
  fs::create_directory(tmp / "adir");
  EXPECT_THROW(save(tmp / "adir", a), CheckpointError);
  EXPECT_TRUE(fs::is_directory(tmp / "adir"));
  EXPECT_EQ(tmp.count(), 2u);
  loadmodel(c, load(path));
  EXPECT_EQ(c(ones(3, 2)).to_vector<float>(), b(ones(3, 2)).to_vector<float>());
}

// Any legal file name saves: the temporary file's name must fit NAME_MAX too.
TEST(Checkpoints, AnyLegalFileNameSaves) {
  TempDir tmp;
  MLP a = mlp();
  for (size_t len : {size_t(1), size_t(240), size_t(250), size_t(NAME_MAX)}) {
    SCOPED_TRACE(len);
    const std::string path = tmp / std::string(len, 'm');
    save(path, a);
    save(path, a);  // and replaces itself
    MLP b = mlp();
    loadmodel(b, load(path));
    EXPECT_EQ(parameter_bytes(b), parameter_bytes(a));
    fs::remove(path);
    EXPECT_EQ(tmp.count(), 0u) << "no temporary file is left behind";
  }
  // A path that ends in '/' names no file.
  EXPECT_NE(error_of([&] { save(tmp / "dir/", a); }).find("names a directory"), std::string::npos);
  EXPECT_EQ(tmp.count(), 0u);
}

// The temporary files a killed save leaves are found by interrupted_saves,
// and only those: for a long name too, whose temporary name is cut.
TEST(Checkpoints, InterruptedSavesAreFound) {
  TempDir tmp;
  const std::string long_name(200, 'n');
  for (const char* f : {".m.safetensors.0123456789abcdef.tmp", ".m.safetensors.00000000000000ff.tmp", "m.safetensors",
                        ".m.safetensors.0123456789abcdeg.tmp", ".m.safetensors.123.tmp", ".x.safetensors.0123456789abcdef.tmp"})
    std::ofstream(tmp / f) << "x";
  std::ofstream(tmp / ("." + long_name.substr(0, 32) + ".fedcba9876543210.tmp")) << "x";
  EXPECT_EQ(interrupted_saves(tmp / "m.safetensors"),
            (std::vector<std::string>{tmp / ".m.safetensors.00000000000000ff.tmp",
                                      tmp / ".m.safetensors.0123456789abcdef.tmp"}));  // sorted
  EXPECT_EQ(interrupted_saves(tmp / long_name).size(), 1u);
  EXPECT_TRUE(interrupted_saves(tmp / "missing-dir/m.safetensors").empty());
  save(tmp / "m.safetensors", mlp());  // a finished save leaves none of its own
  EXPECT_EQ(interrupted_saves(tmp / "m.safetensors").size(), 2u);
}

// A write that fails part-way (here: over the file size limit) leaves the old
// file as it was and no temporary file.
TEST(Checkpoints, AFailedWriteLeavesNoTemporaryFile) {
  TempDir tmp;
  const std::string path = tmp / "m.safetensors";
  save(path, mlp());
  const auto before = slurp(path);
  std::string msg;
  {
    struct sigaction ignore {}, old {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &old);  // so that write() fails with EFBIG instead of killing the process
    ScopedLimit limit(RLIMIT_FSIZE, before.size() / 2);
    msg = error_of([&] { save(path, Chain(Dense(30, 40), Dense(40, 2))); });
    ::sigaction(SIGXFSZ, &old, nullptr);
  }
  EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unchanged"), std::string::npos) << msg;
  EXPECT_EQ(tmp.count(), 1u) << "the temporary file must be removed";
  EXPECT_EQ(slurp(path), before);
}

// flx tensors have at most FLX_MAX_DIMS dims; a file's tensor with more is
// refused naming the file, the tensor, its dims and the limit.
TEST(Checkpoints, TooManyDimsNamesTheFileTheTensorAndTheLimit) {
  TempDir tmp;
  const float v[2] = {1, 2};
  const std::string path = tmp / "deep.safetensors";
  spit(path, safetensors::serialize({{"ok", Float32, {2}, v, sizeof v},
                                     {"deep.weight", Float32, {1, 1, 1, 1, 1, 1, 1, 1, 2}, v, sizeof v}},
                                    {}));
  std::string m = error_of([&] { load(path); });
  EXPECT_EQ(m.rfind(path, 0), 0u) << m;
  EXPECT_NE(m.find("tensor \"deep.weight\""), std::string::npos) << m;
  EXPECT_NE(m.find("[1, 1, 1, 1, 1, 1, 1, 1, 2]"), std::string::npos) << m;
  EXPECT_NE(m.find("9 dims"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 8"), std::string::npos) << m;
}

// Running out of memory while loading is a CheckpointError, never
// std::bad_alloc. A child process limits its address space and loads a
// 3 GB file (sparse: it takes no disk).
TEST(CheckpointsDeathTest, OutOfMemoryIsACheckpointError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of shadow memory, so an address-space limit cannot fail one allocation";
#else
  TempDir tmp;
  const std::string path = tmp / "big.safetensors";
  const uint64_t n = 3'000'000'000;
  std::string header = "{\"big\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[0," +
                       std::to_string(n) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> bytes(8 + header.size());
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  spit(path, bytes);
  fs::resize_file(path, bytes.size() + n);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(flx::testing::exit_after_out_of_memory<CheckpointError>([&] { load(path); },
                                                                     [&] { fs::remove_all(tmp.path); }),
              ::testing::ExitedWithCode(0), "not enough memory");
#endif
}

TEST(Checkpoints, TruncatedAndMissingFilesAreCheckpointErrors) {
  TempDir tmp;
  const std::string path = tmp / "m.safetensors";
  save(path, mlp());
  auto bytes = safetensors::read_file(path);
  for (size_t keep : {size_t(0), size_t(7), size_t(8), size_t(40), bytes.size() - 1}) {
    std::ofstream(tmp / "cut.safetensors", std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(keep));
    std::string m = error_of([&] { load(tmp / "cut.safetensors"); });
    EXPECT_NE(m.find(tmp / "cut.safetensors"), std::string::npos) << "cut at " << keep << ": " << m;
  }
  EXPECT_NE(error_of([&] { load(tmp / "absent.safetensors"); }).find("absent.safetensors"), std::string::npos);
}

TEST(Checkpoints, OptimiserStateResumesTrainingExactly) {
  TempDir tmp;
  set_seed(3);
  Tensor x = randn(3, 16), y = randn(2, 16);
  auto loss = [&](const MLP& m) { return mse(m(x), y); };
  auto train = [&](MLP& m, OptState& opt, int steps) {
    for (int i = 0; i < steps; ++i) update(opt, m, std::get<0>(gradient(loss, m)));
  };
  auto rule = OptimiserChain(ClipNorm(1.0), Adam(0.01));
  MLP m = mlp();
  OptState opt = setup(rule, m);
  train(m, opt, 3);
  save(tmp / "m.safetensors", m);
  save(tmp / "opt.safetensors", opt);
  train(m, opt, 4);  // the uninterrupted run

  MLP r = mlp();  // a new process, in effect
  OptState ropt = setup(rule, r);
  loadmodel(r, load(tmp / "m.safetensors"));
  loadmodel(ropt, load(tmp / "opt.safetensors"));
  train(r, ropt, 4);
  auto a = leaves(m), b = leaves(r);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "leaf " << i;

  // The state of another rule, or a model file, is refused by name.
  OptState mom = setup(Momentum(), r);
  EXPECT_NE(error_of([&] { loadmodel(mom, load(tmp / "opt.safetensors")); }).find("but the optimiser is Momentum"),
            std::string::npos);
  EXPECT_NE(error_of([&] { loadmodel(ropt, load(tmp / "m.safetensors")); }).find("no optimiser state"),
            std::string::npos);
}

// freeze's flags are part of the optimiser state (Optimisers.jl's Leaf has
// `frozen`): a run resumed from a checkpoint leaves the same tensors alone.
TEST(Checkpoints, FrozenLeavesStayFrozenAfterLoading) {
  TempDir tmp;
  MLP m = mlp();
  OptState opt = setup(Adam(0.01), m);
  ASSERT_EQ(freeze(opt, "layers.0"), 2u);
  save(tmp / "opt.safetensors", opt);
  OptState fresh = setup(Adam(0.01), m);
  ASSERT_EQ(freeze(fresh, "layers.1.bias"), 1u);  // the checkpoint's flags replace these
  loadmodel(fresh, load(tmp / "opt.safetensors"));
  std::vector<bool> flags;
  for (const auto& leaf : fresh.entries()) flags.push_back(leaf.frozen);
  EXPECT_EQ(flags, (std::vector<bool>{true, true, false, false}));
  // A step moves only the leaves that were not frozen.
  MLP r = mlp();
  OptState ropt = setup(Adam(0.01), r);
  loadmodel(ropt, load(tmp / "opt.safetensors"));
  const auto before = trainables(r);
  std::vector<std::vector<float>> start;
  for (const Tensor& p : before) start.push_back(p.to_vector<float>());
  set_seed(4);
  const Tensor x = randn(3, 5), y = randn(2, 5);
  update(ropt, r, std::get<0>(gradient([&](const MLP& mm) { return mse(mm(x), y); }, r)));
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(before[i].to_vector<float>() == start[i], i < 2) << "leaf " << i;
  // Thawed and saved again: nothing is frozen after loading.
  thaw(opt);
  save(tmp / "opt2.safetensors", opt);
  loadmodel(fresh, load(tmp / "opt2.safetensors"));
  for (const auto& leaf : fresh.entries()) EXPECT_FALSE(leaf.frozen) << leaf.path;
  // A frozen path the state does not have is refused, and changes nothing.
  State other = state(opt);
  other.metadata()["flx.frozen"] = "layers.0.weight\nlayers.7.weight";
  ASSERT_EQ(freeze(fresh, "layers.1"), 2u);
  const std::string why = error_of([&] { loadmodel(fresh, other); });
  EXPECT_NE(why.find("\"layers.7.weight\" frozen"), std::string::npos) << why;
  EXPECT_TRUE(fresh.entries()[2].frozen);
  EXPECT_FALSE(fresh.entries()[0].frozen);
}

// ---- checkpoints of other libraries ---------------------------------------------

namespace {

// What PyTorch's nn.Sequential(nn.Linear, nn.ReLU(), nn.Linear).state_dict()
// holds for m: "0.weight", "0.bias", "2.weight", "2.bias" (the ReLU is module
// 1 and has no tensors).
State torch_sequential(const MLP& m) {
  State src = state(m), s;
  for (const char* leaf : {"weight", "bias"}) {
    s.insert(std::string("0.") + leaf, src.at(std::string("layers.0.") + leaf));
    s.insert(std::string("2.") + leaf, src.at(std::string("layers.1.") + leaf));
  }
  return s;
}

std::vector<std::string> names(const State& s) {
  std::vector<std::string> out;
  for (const auto& [name, t] : s) out.push_back(name);
  return out;
}

}  // namespace

TEST(Checkpoints, ForeignNamesAreMappedWhenLoading) {
  const MLP trained = mlp();
  const State torch = torch_sequential(trained);
  MLP m = mlp();
  // As it is, refused; the message gives the call that loads it.
  std::string msg = error_of([&] { loadmodel(m, torch); });
  EXPECT_NE(msg.find("no tensor \"layers.0.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("loadmodel(model, s, {{\"0.\", \"layers.0.\"}, {\"2.\", \"layers.1.\"}})"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("docs/checkpoints.md"), std::string::npos) << msg;

  // Prefixes, as the message says.
  loadmodel(m, torch, {{"0.", "layers.0."}, {"2.", "layers.1."}});
  EXPECT_EQ(parameter_bytes(m), parameter_bytes(trained));
  EXPECT_EQ(m(ones(3, 2)).to_vector<float>(), trained(ones(3, 2)).to_vector<float>());
  // Or any function from the checkpoint's key to the model's.
  MLP f = mlp();
  loadmodel(f, torch, [](const std::string& k) { return "layers." + std::string(k[0] == '0' ? "0" : "1") + k.substr(1); });
  EXPECT_EQ(parameter_bytes(f), parameter_bytes(trained));

  // rename() alone: the same tensors under the new names, metadata kept.
  State t2 = torch;
  t2.metadata()["format"] = "pt";
  State r = rename(t2, {{"0.", "layers.0."}, {"2.", "layers.1."}});
  EXPECT_EQ(names(r), (std::vector<std::string>{"layers.0.weight", "layers.1.weight", "layers.0.bias", "layers.1.bias"}));
  EXPECT_EQ(r.at("layers.1.bias").id(), torch.at("2.bias").id());
  EXPECT_EQ(r.metadata().at("format"), "pt");
  // The longest matching prefix wins; a key that matches none keeps its name.
  State x;
  for (const char* k : {"a.b.c", "a.d", "z"}) x.insert(k, ones(1));
  EXPECT_EQ(names(rename(x, {{"a.", "A."}, {"a.b.", "B."}})), (std::vector<std::string>{"B.c", "A.d", "z"}));
  // A function that returns "" leaves a tensor out (BatchNorm's
  // num_batches_tracked, say, which flx does not keep).
  State extra = torch;
  extra.insert("1.num_batches_tracked", tensor(std::vector<int64_t>{7}, Shape{}));
  MLP e = mlp();
  loadmodel(e, extra, [](const std::string& k) -> std::string {
    if (k.ends_with("num_batches_tracked")) return "";
    return (k[0] == '0' ? "layers.0" : "layers.1") + k.substr(1);
  });
  EXPECT_EQ(parameter_bytes(e), parameter_bytes(trained));
  // A Chain with the activation as a layer is numbered as nn.Sequential is.
  auto c = Chain(Dense(3, 4), relu, Dense(4, 2));
  loadmodel(c, torch, [](const std::string& k) { return "layers." + k; });
  EXPECT_EQ(c(ones(3, 2)).to_vector<float>(), trained(ones(3, 2)).to_vector<float>());
  // Two keys that map to one name are refused, naming both.
  msg = error_of([&] { rename(torch, [](const std::string&) { return std::string("same"); }); });
  EXPECT_NE(msg.find("\"0.weight\" and \"2.weight\" both map to \"same\""), std::string::npos) << msg;
}

TEST(Checkpoints, ARefusedMappedLoadChangesNoParameter) {
  MLP model = mlp();
  const auto before = parameter_bytes(model);
  const std::map<std::string, std::string> prefixes{{"0.", "layers.0."}, {"2.", "layers.1."}};
  auto expect_refused = [&](const std::function<void()>& f, const std::string& phrase) {
    std::string m = error_of(f);
    EXPECT_NE(m.find(phrase), std::string::npos) << m;
    EXPECT_EQ(parameter_bytes(model), before) << "a refused checkpoint must not touch the model";
  };
  // The first layer fits, the second is wider: nothing is copied.
  const State wide = torch_sequential(Chain(Dense(3, 4, relu), Dense(4, 3)));
  expect_refused([&] { loadmodel(model, wide, prefixes); },
                 "\"layers.1.weight\" (checkpoint key \"2.weight\") has shape (3×4) in the checkpoint but (2×4)");
  State ints;
  for (const auto& [n, t] : torch_sequential(mlp())) ints.insert(n, t.to(Int64));
  expect_refused([&] { loadmodel(model, ints, prefixes); }, "is Int64 in the checkpoint but Float32");
  expect_refused([&] { loadmodel(model, torch_sequential(mlp()), {{"0.", "layers.0."}}); },
                 "no tensor \"layers.1.weight\"");
  expect_refused([&] { loadmodel(model, torch_sequential(mlp()), [](const std::string&) { return std::string("x"); }); },
                 "both map to \"x\"");
  State extra = torch_sequential(mlp());
  extra.insert("4.weight", ones(2, 2));
  expect_refused([&] { loadmodel(model, extra, prefixes); },
                 "the checkpoint holds \"4.weight\", which the model has no place for");
}

// A PyTorch Conv2d weight [out, in, kH, kW], as load() reads it: that shape.
TEST(Checkpoints, TorchConvWeightsConvertForCrossCorAndConv) {
  const int64_t O = 4, I = 2, KH = 2, KW = 3;  // not a palindrome: (3, 2, 2, 3) would load unconverted
  std::vector<float> v(size_t(O * I * KH * KW));
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(k);
  const Tensor t = tensor(v, Shape{O, I, KH, KW});  // t(o, i, h, w) = v[o + O (i + I (h + KH w))]
  auto at = [&](int64_t o, int64_t i, int64_t h, int64_t w) { return v[size_t(o + O * (i + I * (h + KH * w)))]; };
  // CrossCor's (kW, kH, in, out): the dims reversed, nothing flipped; Conv's: flipped too.
  const Tensor cc = torch_to_crosscor(t), cv = torch_to_conv(t);
  EXPECT_EQ(cc.shape(), (Shape{KW, KH, I, O}));
  EXPECT_EQ(cv.shape(), (Shape{KW, KH, I, O}));
  const auto ccv = cc.to_vector<float>(), cvv = cv.to_vector<float>();
  for (int64_t w = 0; w < KW; ++w)
    for (int64_t h = 0; h < KH; ++h)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t o = 0; o < O; ++o) {
          const size_t k = size_t(w + KW * (h + KH * (i + I * o)));
          EXPECT_EQ(ccv[k], at(o, i, h, w)) << w << h << i << o;
          EXPECT_EQ(cvv[k], at(o, i, KH - 1 - h, KW - 1 - w)) << w << h << i << o;
        }
  // So CrossCor and Conv compute the same function from the same PyTorch weight.
  const Tensor b = tensor(std::vector<float>{0.5f, -1, 2, 0.25f}, Shape{O}), x = rand(5, 4, I, 2);
  const auto y1 = CrossCor(cc, b)(x).to_vector<float>(), y2 = Conv(cv, b)(x).to_vector<float>();
  ASSERT_EQ(y1.size(), y2.size());
  for (size_t k = 0; k < y1.size(); ++k) EXPECT_NEAR(y1[k], y2[k], 1e-5f * (1 + std::abs(y1[k])));
  // Conv1d and Conv3d weights too.
  EXPECT_EQ(torch_to_conv(rand(4, 2, 5)).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(torch_to_crosscor(rand(4, 2, 1, 2, 3)).shape(), (Shape{3, 2, 1, 2, 4}));
  // Anything else is an ArgumentError that names what it found.
  const std::string m = flx::testing::error_message<ArgumentError>([] { torch_to_crosscor(rand(4, 3)); });
  EXPECT_NE(m.find("torch_to_crosscor: expected a PyTorch convolution weight"), std::string::npos) << m;
  EXPECT_NE(m.find("found shape (4×3) (2 dims)"), std::string::npos) << m;

  // Loaded without the conversion, the weight is refused with the conversion to use.
  State s;
  s.insert("weight", t);
  s.insert("bias", b);
  s.metadata()["format"] = "pt";
  CrossCor layer({KW, KH}, I, O);  // flx lists the kernel as its dims: (kW, kH)
  const auto before = parameter_bytes(layer);
  std::string msg = error_of([&] { loadmodel(layer, s); });
  EXPECT_NE(msg.find("its dims reversed are the model's"), std::string::npos) << msg;
  EXPECT_NE(msg.find("torch_to_crosscor"), std::string::npos) << msg;
  EXPECT_EQ(parameter_bytes(layer), before);
  // map_tensors converts it: the same names in the same order, the same metadata.
  const State conv = map_tensors(s, [](const std::string& name, const Tensor& w) {
    return name == "weight" ? torch_to_crosscor(w) : w;
  });
  EXPECT_EQ(names(conv), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(conv.metadata().at("format"), "pt");
  EXPECT_EQ(conv.at("bias").id(), b.id());
  loadmodel(layer, conv);
  EXPECT_EQ(layer.weight.to_vector<float>(), ccv);
  // A function that gives back no tensor is an ArgumentError naming the key.
  const std::string u = flx::testing::error_message<ArgumentError>(
      [&] { map_tensors(s, [](const std::string&, const Tensor&) { return Tensor(); }); });
  EXPECT_NE(u.find("map_tensors: the function returned an undefined tensor for \"weight\""), std::string::npos) << u;
}

// PyTorch's nn.Embedding weight [n, d] loads as (n, d); flx's Embedding holds
// (d, n), the same bytes: refused with the transposition to use, then loaded
// with it. A Dense weight the other way round gets the same advice.
TEST(Checkpoints, TorchEmbeddingWeightsLoadTransposed) {
  const Tensor torch_weight = tensor(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3});  // [n=4, d=3]
  State s;
  s.insert("weight", torch_weight);
  Embedding emb(4, 3);
  const std::string msg = error_of([&] { loadmodel(emb, s); });
  EXPECT_NE(msg.find("\"weight\" has shape (4×3) in the checkpoint but (3×4) in the model; its dims reversed are the "
                     "model's, as in a PyTorch nn.Embedding weight [n, d] (flx's Embedding holds (d, n))"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("transpose it with permutedims(w, {1, 0})"), std::string::npos) << msg;
  loadmodel(emb, map_tensors(s, [](const std::string&, const Tensor& w) { return permutedims(w, {1, 0}); }));
  // Row k of the (n, d) weight loaded is column k of flx's: index 2 looks up row 2.
  EXPECT_EQ(emb(2).to_vector<float>(), (std::vector<float>{2, 6, 10}));
  EXPECT_NE(error_of([] {
              State d;
              d.insert("weight", ones(3, 2));
              d.insert("bias", zeros(2));
              Dense layer(3, 2);
              loadmodel(layer, d);
            }).find("its dims reversed are the model's"),
            std::string::npos);
}

// ---- every device --------------------------------------------------------------

class CheckpointDevices : public ::testing::TestWithParam<Device> {};

INSTANTIATE_TEST_SUITE_P(Devices, CheckpointDevices, ::testing::ValuesIn(flx::testing::conformance_devices()),
                         [](const auto& info) { return std::string(info.param.backend()) + std::to_string(info.param.ordinal()); });

TEST_P(CheckpointDevices, SaveFromTheDeviceLoadOntoTheDevice) {
  TempDir tmp;
  Device dev = GetParam();
  MLP trained = mlp() | dev;
  OptState opt = setup(Adam(0.1), trained);
  Tensor x = randn(3, 8) | dev;
  for (int i = 0; i < 2; ++i)
    update(opt, trained, std::get<0>(gradient([&](const MLP& m) { return sum(square(m(x))); }, trained)));
  save(tmp / "m.safetensors", trained);  // no `| cpu` first: save copies to the host
  save(tmp / "opt.safetensors", opt);
  MLP fresh = mlp() | dev;
  loadmodel(fresh, load(tmp / "m.safetensors"));
  for (const Tensor& t : leaves(fresh)) EXPECT_EQ(t.device(), dev) << "loadmodel keeps the model where it is";
  EXPECT_EQ(fresh(x).to_vector<float>(), trained(x).to_vector<float>());
  OptState fopt = setup(Adam(0.1), fresh);
  loadmodel(fopt, load(tmp / "opt.safetensors"));
  for (size_t i = 0; i < opt.entries().size(); ++i) {
    EXPECT_EQ(fopt.entries()[i].state.scalars, opt.entries()[i].state.scalars);
    for (size_t k = 0; k < opt.entries()[i].state.tensors.size(); ++k) {
      EXPECT_EQ(fopt.entries()[i].state.tensors[k].device(), dev);
      EXPECT_EQ(fopt.entries()[i].state.tensors[k].to_vector<float>(), opt.entries()[i].state.tensors[k].to_vector<float>());
    }
  }
}
