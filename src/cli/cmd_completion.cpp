// `jobman completion SHELL`: print the completion script, generated from this very CLI definition.
#include "commands.hpp"
#include "completion.hpp"

namespace jobman::cli {

void add_completion_command(CLI::App& app, Context& ctx) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("completion", "Print the shell completion script for bash, zsh or fish");
  cmd->add_option("SHELL", *shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  cmd->footer("Examples:\n"
              "  source <(jobman completion bash)\n"
              "  jobman completion zsh > ~/.zfunc/_jobman\n"
              "  jobman completion fish > ~/.config/fish/completions/jobman.fish\n"
              "'cmake --install' installs all three.");
  const CLI::App* root = &app;
  cmd->callback([&ctx, shell, root] {
    ctx.action = [&ctx, shell, root] {
      if (*shell == "bash") {
        *ctx.out << bash_completion(*root);
      } else if (*shell == "zsh") {
        *ctx.out << zsh_completion(*root);
      } else {
        *ctx.out << fish_completion(*root);
      }
      return 0;
    };
  });
}

} // namespace jobman::cli
