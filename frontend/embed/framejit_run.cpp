// framejit_run.cpp — `framejit-run [--backend jit|eager|none] script.py [args...]`: runs a script
// as __main__ in an embedded interpreter with framejit installed, like `python -m framejit`.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "framejit/host.h"

int main(int argc, char** argv) {
  framejit::HostOptions options;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      options.backend = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: framejit-run [--backend jit|eager|none] script.py [args ...]\n");
      return 0;
    } else {
      std::fprintf(stderr, "framejit-run: unknown option %s\nusage: framejit-run [--backend jit|eager|none] script.py [args ...]\n",
                   argv[i]);
      return 2;
    }
  }
  if (i == argc) {
    std::fprintf(stderr, "usage: framejit-run [--backend jit|eager|none] script.py [args ...]\n");
    return 2;
  }
  if (options.backend != "jit" && options.backend != "eager" && options.backend != "none") {
    std::fprintf(stderr, "framejit-run: --backend must be jit, eager or none\n");
    return 2;
  }
  framejit::Host host(options);
  if (!host.status()) {
    std::fprintf(stderr, "framejit-run: %s\n", host.status().message().c_str());
    return 1;
  }
  return host.run_script(argv[i], std::vector<std::string>(argv + i + 1, argv + argc));
}
