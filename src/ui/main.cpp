// jobman-ui: the jobman command line with the dashboard's web server linked in. `jobman ui` runs it, so that only
// `ui` loads cpp-httplib and the TLS and compression libraries it links.
#include "jobman/cli/app.hpp"
#include "jobman/ui/server.hpp"

int main(int argc, char** argv) {
  jobman::cli::set_dashboard_server(jobman::ui::serve);
  return jobman::cli::run(argc, argv);
}
