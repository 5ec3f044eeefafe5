// The main of the tests tools/opt.bzl's kiln_opt_test stamps: runs each
// `kilnc opt` test file named on the command line (tools/opt_file_test.h).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "tools/opt_file_test.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE...\n";
    return 2;
  }
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << argv[i] << "\n";
      ++failed;
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<int> cases = kiln::tools::RunOptTestFile(text.str(), argv[i]);
    if (cases.ok()) {
      std::cout << "PASS " << argv[i] << ": " << *cases << " cases\n";
    } else {
      std::cerr << "FAIL " << cases.status().message() << "\n";
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
