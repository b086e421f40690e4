#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

void show(const char* what, const Tensor& y) {
  std::cout << what;
  for (int64_t v : y.to_vector<int64_t>()) std::cout << " " << v;
  std::cout << "\n";
}

int main() {
  // 10 observations (columns) of 2 features, and their labels 0..9.
  Tensor X = rand(2, 10);
  Tensor Y = tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});

  // splitobs: in order, the first round(0.7 n) observations and the rest.
  auto [train, test] = splitobs(std::tuple{X, Y}, {.at = 0.7});
  std::cout << numobs(train) << " train, " << numobs(test) << " test\n";
  show("test labels:", std::get<1>(getobs(test, 0, numobs(test))));

  // shuffleobs: a permuted view (seeded here; else from set_seed's generator).
  show("shuffled:", std::get<1>(getobs(shuffleobs(std::tuple{X, Y}, 3), 0, 10)));

  // kfolds: index lists, 0-based, as MLUtils.
  auto [folds_train, folds_val] = kfolds(10, 5);
  std::cout << "fold 2 validates " << folds_val[1][0] << " and " << folds_val[1][1] << ", trains on "
            << folds_train[1].size() << "\n";

  // Either part is loader data; batches prepared on several threads are
  // exactly the serial loader's.
  DataLoader loader(train, {.batchsize = 3, .shuffle = true, .seed = 1, .parallel = true});
  for (auto [x, y] : loader) show("batch:", y);

  // collate: how observations become a batch, once per tensor of the batch.
  auto sum_collate = [](const std::vector<Tensor>& obs) { return sum(batch(obs), {0}); };
  DataLoader summed(X, {.batchsize = 5, .collate = sum_collate});
  for (Tensor s : summed) std::cout << "collated " << s.shape() << "\n";
}
