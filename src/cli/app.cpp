#include "jobman/cli/app.hpp"

namespace jobman::cli {

int run(int /*argc*/, char** /*argv*/) { return 0; }

} // namespace jobman::cli
