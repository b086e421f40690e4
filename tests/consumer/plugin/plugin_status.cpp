// What the installed libflx says of the toy plugin (FLX_BACKEND_PATH names
// the folder it was built in).
#include <flx/flx.hpp>

#include <iostream>

int main() {
  const flx::BackendStatus st = flx::backend_status("Metal");
  std::cout << "found " << st.plugin_found << ", functional " << st.functional << ": " << st.reason << "\n";
}
