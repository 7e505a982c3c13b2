// The command line: parses argv into a command, runs it, maps errors to exit codes.
#pragma once

namespace jobman::cli {

// Runs jobman with the process's arguments; returns the exit code (see README.md, "Exit codes").
int run(int argc, char** argv);

} // namespace jobman::cli
