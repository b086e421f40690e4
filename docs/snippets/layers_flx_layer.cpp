#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

struct TwoPart {
  Chain<Dense, Dense> body;
  Dense head;
};
FLX_LAYER(TwoPart, body, head)

int main() {
  TwoPart m{Chain(Dense(2, 3), Dense(3, 4)), Dense(4, 5)};
  std::cout << m << "\n";
}
