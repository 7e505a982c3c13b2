#include "jobman/cli/app.hpp"

#include "commands.hpp"
#include "jobman/domain/pricing.hpp"
#include "jobman/util/error.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <optional>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace jobman::cli {

namespace {

// Passes each record to `inner` with the control characters of its message escaped: messages quote worker output,
// API answers and configs, which must not drive the terminal or forge log lines (a newline becomes \x0a).
class EscapingSink final : public spdlog::sinks::sink {
public:
  explicit EscapingSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const auto text =
        util::escape_controls(std::string_view(msg.payload.data(), msg.payload.size()), util::LineBreaks::escape);
    spdlog::details::log_msg escaped = msg;
    escaped.payload = spdlog::string_view_t(text.data(), text.size());
    inner_->log(escaped);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

void setup_logging(bool verbose, bool daemon) {
  auto sink = std::make_shared<EscapingSink>(std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      util::color_enabled(2) ? spdlog::color_mode::automatic : spdlog::color_mode::never));
  auto logger = std::make_shared<spdlog::logger>("jobman", sink);
  if (daemon) {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$: %v");
    logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  } else if (verbose) {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%P] %^%l%$: %v");
    logger->set_level(spdlog::level::debug);
  } else {
    logger->set_pattern("jobman: %^%l%$: %v");
    logger->set_level(spdlog::level::info);
  }
  spdlog::set_default_logger(logger);
}

// Error messages carry text from configs, the API and the workers: their control characters are shown, not obeyed.
int report(std::ostream& err, const std::string& message, ExitCode code) {
  err << "jobman: error: " << util::escape_controls(message, util::LineBreaks::keep) << '\n';
  return static_cast<int>(code);
}

// The option named `name` ("--status", "-f") of `command` or of a command above it (options fall through to the
// commands above), or nullptr.
const CLI::Option* find_option(const CLI::App& command, const std::string& name) {
  for (const CLI::App* at = &command; at != nullptr; at = at->get_parent()) {
    if (const auto* option = at->get_option_no_throw(name)) {
      return option;
    }
  }
  return nullptr;
}

// The subcommand of `command` that `word` names, or nullptr.
const CLI::App* find_subcommand(const CLI::App& command, const std::string& word) {
  for (const auto* sub : command.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) {
      return sub;
    }
  }
  return nullptr;
}

// `command`'s name from the top: "jobman worker".
std::string command_path(const CLI::App& command) {
  std::string path = command.get_name();
  for (const CLI::App* at = command.get_parent(); at != nullptr; at = at->get_parent()) {
    path.insert(0, at->get_name() + " ");
  }
  return path;
}

// Why a command line that CLI11 refused failed, when the cause is a word that names no command or option where it
// stands (a typo, most often): "unknown command 'creat' (did you mean 'create'?)", with the help to run. Nothing
// when every command and option word is known (a missing argument, a bad value: CLI11's own message says it).
std::optional<std::string> unknown_word(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* at = &app;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      break; // The rest is a command for a worker, not jobman's.
    }
    if (word.size() > 1 && word[0] == '-') {
      const bool long_name = word.starts_with("--");
      const auto equals = word.find('=');
      // "-fv" is two short flags: the first names the option.
      const std::string name = long_name ? word.substr(0, equals) : word.substr(0, 2);
      if (const auto* option = find_option(*at, name)) {
        const bool takes_value = option->get_items_expected_max() > 0;
        const bool value_attached = long_name ? equals != std::string::npos : word.size() > 2;
        if (takes_value && !value_attached && i + 1 < args.size()) {
          ++i; // Its value, which may be any word.
        }
        continue;
      }
      std::vector<std::string> names;
      for (const CLI::App* level = at; level != nullptr; level = level->get_parent()) {
        for (const auto* option : level->get_options()) {
          for (const auto& lname : option->get_lnames()) {
            names.push_back("--" + lname);
          }
        }
      }
      const auto close = util::closest_match(long_name ? name : word, names);
      return "unknown option '" + name + "'" + (close ? " (did you mean '" + *close + "'?)" : std::string()) +
             "\nRun '" + command_path(*at) + " --help' for its options.";
    }
    if (const auto* sub = find_subcommand(*at, word)) {
      at = sub;
      continue;
    }
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    const bool takes_words = !at->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (subs.empty() || takes_words) {
      continue; // An argument of the command.
    }
    std::vector<std::string> names;
    for (const auto* sub : subs) {
      names.push_back(sub->get_name());
      for (const auto& alias : sub->get_aliases()) {
        names.push_back(alias);
      }
    }
    const auto close = util::closest_match(word, names);
    return "unknown command '" + word + "'" + (close ? " (did you mean '" + *close + "'?)" : std::string()) +
           "\nRun '" + command_path(*at) + " --help' for the commands.";
  }
  return std::nullopt;
}

} // namespace

void silence_logging() {
  spdlog::set_level(spdlog::level::off);
}

CLI::Option* add_json_flag(CLI::App& command, bool& json) {
  return command.add_flag("--json", json, "Print machine-readable JSON on stdout (see docs/JSON.md); no logging");
}

CLI::Validator pricing_check() {
  const CLI::IsMember member(std::vector<std::string>{"spot", "preemptible", "standard", "ondemand"});
  auto check = [member](std::string& value) {
    if (domain::parse_pricing(value)) {
      return std::string();
    }
    std::string copy = value;
    return member(copy);
  };
  return CLI::Validator(check, member.get_description());
}

void build_app(CLI::App& app, Context& ctx) {
  app.description("jobman: run ML training jobs on Cloud TPU queued resources (or the bundled mock cloud)");
  app.name("jobman");
  app.set_version_flag("--version", std::string("jobman ") + JOBMAN_VERSION, "Print the version and exit");
  app.add_flag("-v,--verbose", ctx.verbose, "Log debug detail with timestamps and pid to stderr");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("Examples:\n"
             "  jobman create configs/examples/spot-v4-systolic.yaml\n"
             "  jobman list\n"
             "  jobman show 000042\n"
             "  jobman logs -f 000042\n"
             "  jobman cancel 000042\n"
             "\n"
             "Exit codes: 0 ok, 1 error, 2 usage or config error, 3 no such job, 4 job failed,\n"
             "5 cancelled, 124 timed out, 130 interrupted. Run 'jobman COMMAND --help' for a command.");
  add_create_command(app, ctx);
  add_validate_command(app, ctx);
  add_list_command(app, ctx);
  add_show_command(app, ctx);
  add_logs_command(app, ctx);
  add_ssh_command(app, ctx);
  add_resume_command(app, ctx);
  add_cancel_command(app, ctx);
  add_delete_command(app, ctx);
  add_clean_command(app, ctx);
  add_sync_command(app, ctx);
  add_reservations_command(app, ctx);
  add_settings_command(app, ctx);
  add_completion_command(app, ctx);
  add_daemon_command(app, ctx);
  add_wait_command(app, ctx);
  add_worker_command(app, ctx);
  add_task_command(app, ctx);
  add_status_command(app, ctx);
  add_availability_command(app, ctx);
  add_buckets_command(app, ctx);
  add_report_command(app, ctx);
  add_ui_command(app, ctx);
  add_store_command(app, ctx);
  app.get_subcommand("store")->footer(
      "Examples:\n"
      "  jobman store migrate --to postgresql://alice@db.lab.org/jobman\n"
      "  jobman store admins add alice\n"
      "  jobman store limits\n"
      "  jobman store share v4:spot 64 --user alice\n"
      "  jobman store cap v4:spot 512\n"
      "docs/LAB.md sets up a lab's shared store. Run 'jobman store COMMAND --help' for a command.");
}

struct CommandLine::State {
  Context ctx;
  CLI::App app;
  Outcome outcome = Outcome::run;
  std::string text;
  int exit_code = 0;
  std::string command = "jobman";

  void fail(const std::string& message, ExitCode code) {
    outcome = Outcome::error;
    text = "jobman: error: " + util::escape_controls(message, util::LineBreaks::keep) + "\n";
    exit_code = static_cast<int>(code);
  }
};

CommandLine::CommandLine(int argc, const char* const* argv) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.ctx.color = util::color_enabled(1);
  try {
    build_app(s.app, s.ctx);
  } catch (const CLI::Error& e) {
    s.fail(std::string("internal: ") + e.what(), ExitCode::error);
    return;
  }
  try {
    s.app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    s.outcome = Outcome::print;
    s.text = s.app.help();
  } catch (const CLI::CallForAllHelp&) {
    s.outcome = Outcome::print;
    s.text = s.app.help("", CLI::AppFormatMode::All);
  } catch (const CLI::CallForVersion& e) {
    s.outcome = Outcome::print;
    s.text = std::string(e.what()) + "\n";
  } catch (const CLI::ParseError& e) {
    if (const auto unknown = unknown_word(s.app, std::vector<std::string>(argv + std::min(argc, 1), argv + argc))) {
      s.fail(*unknown, ExitCode::usage);
      return;
    }
    // Name the subcommand that was being parsed, so the hint points at its help.
    for (const auto* sub : s.app.get_subcommands()) {
      s.command += " " + sub->get_name();
    }
    s.fail(std::string(e.what()) + "\nRun '" + s.command + " --help' for usage.", ExitCode::usage);
    return;
  } catch (const Error& e) {
    s.fail(e.what(), e.code());
    return;
  }
  for (const auto* sub : s.app.get_subcommands()) {
    s.command += " " + sub->get_name();
  }
  if (s.outcome == Outcome::run && !s.ctx.action) {
    s.fail("no command given; run 'jobman --help'", ExitCode::usage);
  }
}

CommandLine::~CommandLine() = default;

CommandLine::Outcome CommandLine::outcome() const {
  return state_->outcome;
}

const std::string& CommandLine::text() const {
  return state_->text;
}

int CommandLine::exit_code() const {
  return state_->exit_code;
}

const std::string& CommandLine::command() const {
  return state_->command;
}

int CommandLine::execute() {
  State& s = *state_;
  setup_logging(s.ctx.verbose, s.ctx.daemon);
  try {
    return s.ctx.action();
  } catch (const Error& e) {
    return report(std::cerr, e.what(), e.code());
  } catch (const std::exception& e) {
    return report(std::cerr, e.what(), ExitCode::error);
  }
}

int run(int argc, char** argv) {
  CommandLine line(argc, argv);
  switch (line.outcome()) {
  case CommandLine::Outcome::print: std::cout << line.text(); return line.exit_code();
  case CommandLine::Outcome::error: std::cerr << line.text(); return line.exit_code();
  case CommandLine::Outcome::run: break;
  }
  return line.execute();
}

} // namespace jobman::cli
