// The dashboard's web server: cpp-httplib on 127.0.0.1, every request answered by reporting::Dashboard.
#pragma once

#include "jobman/reporting/dashboard.hpp"

#include <ostream>

namespace jobman::ui {

// Listens on 127.0.0.1:`port` (0: any free port), prints the dashboard's URL on `out`, and serves until SIGINT or
// SIGTERM; 0 then, 1 when it cannot listen.
int serve(reporting::Dashboard& dashboard, int port, std::ostream& out);

} // namespace jobman::ui
