// Building the model, part two: the whole JobConfig. Checks the top-level sections, builds the optional ones (gcsfuse,
// ssh, the environments, setup, vars, brevo_email) and checks the environment job.env_type names.
#include "interpolation.hpp"
#include "jobman/util/system.hpp"
#include "loader_parts.hpp"
#include "schema.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <regex>

namespace jobman::config::detail {

namespace {

// Resolves a local path written in the config: "~" expanded; a relative path from the working directory where it
// exists there (the Python jobman hands such paths to scp unchanged, so its users write them from where they run it,
// usually their repository's root), else from the config's directory.
std::string local_path(const BuildContext& ctx, const std::string& path) {
  if (path.empty()) {
    return path;
  }
  std::filesystem::path out = util::expand_user(path);
  if (out.is_relative()) {
    std::error_code ec;
    if (std::filesystem::exists(out, ec)) {
      out = std::filesystem::absolute(out, ec);
    } else {
      out = ctx.base_dir / out;
    }
  }
  return out.lexically_normal().string();
}

// Section lookup in the document: its entry (or nullptr) and where messages about it point.
struct SectionRef {
  const Node* node = nullptr;
  Origin anchor;
};

// The sections every job config must have.
constexpr std::array<std::string_view, 3> kRequiredSections = {"job", "tpu", "command"};

SectionRef section_ref(const Node& root, const std::string& name, const std::string& file) {
  if (const Entry* entry = root.find(name)) {
    return SectionRef{&entry->value, entry->key_origin};
  }
  return SectionRef{nullptr, Origin{file, 0, 0}};
}

// True when one line of setup.script is meant as a file's path rather than a script: no blanks, and the name of a
// shell script (a one-line command such as "bash ~/setup.sh" has a blank).
bool looks_like_script_path(std::string_view line) {
  return line.ends_with(".sh") && line.find_first_of(" \t") == std::string_view::npos;
}

// The setup section. setup.script is the script's text or, when it is one line naming a file (relative to the
// config's directory), that file's text, read now. Text without a final newline gets one, so that the snapshot's text
// (which then has a newline) is never taken for a path when it is read again.
std::optional<SetupSection> build_setup(Problems& p, const Section& s, const BuildContext& ctx) {
  if (s.get("script") == nullptr) {
    // Any other key is unknown, and reported as such; an empty section lacks the script.
    if (s.node()->entries.empty()) {
      s.missing("script", "write the script's text, or the path of a file that holds it");
    }
    return std::nullopt;
  }
  const auto text = s.str("script", Presence::required); // Reports null and empty (or blank) text.
  if (!text) {
    return std::nullopt;
  }
  SetupSection out;
  out.script = *text;
  if (text->find('\n') == std::string::npos) {
    const std::string line(util::trim(*text));
    std::filesystem::path file = util::expand_user(line);
    if (file.is_relative()) {
      file = ctx.base_dir / file;
    }
    file = file.lexically_normal();
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
      // A device or a pipe (/dev/zero, /dev/stdin) would never end, and a script is never megabytes long.
      constexpr std::uintmax_t kMaxScript = 1 << 20;
      if (!std::filesystem::is_regular_file(file, ec) || std::filesystem::file_size(file, ec) > kMaxScript) {
        p.error(s.origin("script"), s.path("script"),
                file.string() + " is not a script file (a regular file of at most 1 MiB)");
        return std::nullopt;
      }
      try {
        out.script = util::read_file(file);
      } catch (const Error& e) {
        p.error(s.origin("script"), s.path("script"), e.what());
        return std::nullopt;
      }
      if (util::trim(out.script).empty()) {
        p.error(s.origin("script"), s.path("script"), "the file " + file.string() + " is empty");
        return std::nullopt;
      }
      if (detail::invalid_utf8_offset(out.script) != std::string::npos || out.script.find('\0') != std::string::npos) {
        p.error(s.origin("script"), s.path("script"), "the file " + file.string() + " is not a text file");
        return std::nullopt;
      }
      out.file = file.string();
    } else if (looks_like_script_path(line)) {
      p.error(s.origin("script"), s.path("script"), "file not found: " + file.string(),
              "a path is relative to the config's directory; to run a script the workers already have, write a "
              "command such as 'bash " +
                  line + "'");
      return std::nullopt;
    }
  }
  if (!out.script.ends_with('\n')) {
    out.script += '\n';
  }
  return out;
}

// An e-mail address as jobman-lite checks one: no blanks, one '@', a dot in the domain.
bool looks_like_address(const std::string& text) {
  static const std::regex form(R"([^@\s]+@[^@\s]+\.[^@\s]+)");
  return std::regex_match(text, form);
}

// The notify section: events, Brevo recipients, webhooks, an SMTP server, jobman-lite's Brevo file.
NotifySection build_notify(Problems& p, const Section& s, const BuildContext& ctx) {
  NotifySection out;
  if (const Node* events = s.get("events"); events != nullptr && !events->is_null()) {
    std::vector<NotifyEvent> chosen;
    bool none = false;
    for (const auto& word : s.str_list("events")) {
      std::string upper = word;
      std::transform(upper.begin(), upper.end(), upper.begin(),
                     [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
      if (upper == "ALL") {
        chosen = {NotifyEvent::begin, NotifyEvent::end, NotifyEvent::fail};
      } else if (upper == "NONE") {
        none = true;
      } else if (upper == "BEGIN" || upper == "END" || upper == "FAIL") {
        const auto event = upper == "BEGIN" ? NotifyEvent::begin
                           : upper == "END" ? NotifyEvent::end
                                            : NotifyEvent::fail;
        if (std::find(chosen.begin(), chosen.end(), event) == chosen.end()) {
          chosen.push_back(event);
        }
      } else {
        p.error(s.origin("events"), s.path("events"), "unknown event '" + word + "'",
                "expected BEGIN, END, FAIL, ALL or NONE");
      }
    }
    if (none && !chosen.empty()) {
      p.error(s.origin("events"), s.path("events"), "NONE cannot be combined with other events");
    }
    std::sort(chosen.begin(), chosen.end());
    out.events = none ? std::vector<NotifyEvent>{} : chosen;
  }
  out.mail_to = s.str_list("mail_to");
  for (const auto& address : out.mail_to) {
    if (!looks_like_address(address)) {
      p.error(s.origin("mail_to"), s.path("mail_to"), "'" + address + "' is not an e-mail address");
    }
  }
  out.webhooks = s.str_list("webhooks");
  for (const auto& url : out.webhooks) {
    // A secret one is a call to ${oc.env:...}, or its marker while a recorded config is read back.
    const bool call = detail::has_reference(url) || detail::has_environment_marker(url);
    if (!url.starts_with("https://") && !url.starts_with("http://") && !call) {
      p.error(s.origin("webhooks"), s.path("webhooks"), "a webhook is an http:// or https:// URL",
              "write a secret one as ${oc.env:SLACK_WEBHOOK}");
    }
  }
  if (const Node* smtp = s.get("smtp"); smtp != nullptr && !smtp->is_null()) {
    const Section m(p, smtp, s.path("smtp"), s.origin("smtp"), "notify.smtp");
    SmtpSection server;
    server.url = m.str("url", Presence::required).value_or("");
    if (!server.url.empty() && !server.url.starts_with("smtp://") && !server.url.starts_with("smtps://")) {
      p.error(m.origin("url"), m.path("url"), "expected smtp://host:port or smtps://host:port");
    }
    server.from = m.str("from", Presence::required).value_or("");
    if (!server.from.empty() && !looks_like_address(server.from)) {
      p.error(m.origin("from"), m.path("from"), "'" + server.from + "' is not an e-mail address");
    }
    server.to = m.str_list("to");
    if (server.to.empty() && m.present()) {
      m.missing("to", "the addresses to mail");
    }
    for (const auto& address : server.to) {
      if (!looks_like_address(address)) {
        p.error(m.origin("to"), m.path("to"), "'" + address + "' is not an e-mail address");
      }
    }
    server.username = m.str("username").value_or("");
    server.password = m.str("password").value_or("");
    out.smtp = server;
  }
  if (auto file = s.str("brevo_config")) {
    out.brevo_config = (ctx.base_dir / util::expand_user(*file)).lexically_normal().string();
  }
  return out;
}

} // namespace

JobConfig build_config(Problems& p, const Node& root, const BuildContext& ctx) {
  JobConfig config;
  const auto sections = detail::known_keys("");
  // An unknown section is a warning, as the Python jobman ignores it, unless it is the near miss of a required
  // section that is missing (`tpuu:` for `tpu:`): then it is the error, at its own line, instead of the missing one.
  std::vector<std::string> misspelled_required;
  for (const auto& entry : root.entries) {
    if (std::find(sections.begin(), sections.end(), entry.key) == sections.end()) {
      const auto close = util::closest_match(entry.key, sections);
      if (close && root.find(*close) == nullptr &&
          std::find(kRequiredSections.begin(), kRequiredSections.end(), *close) != kRequiredSections.end()) {
        p.error(entry.key_origin, entry.key, "unknown section", "did you mean '" + *close + "'?");
        misspelled_required.push_back(*close);
        continue;
      }
      p.warn(entry.key_origin, entry.key,
             "unknown section, ignored as the Python jobman ignores it" +
                 (close ? " (did you mean '" + *close + "'?)" : std::string()));
    }
  }
  const auto open = [&](const std::string& name, Presence presence) {
    const SectionRef ref = section_ref(root, name, ctx.file);
    if (ref.node == nullptr && presence == Presence::required) {
      if (std::find(misspelled_required.begin(), misspelled_required.end(), name) == misspelled_required.end()) {
        p.error(ref.anchor, name, "required section is missing");
      }
      // Report the section once, not each of its required keys.
      Node broken = detail::make_scalar("", ref.anchor);
      broken.unresolved = true;
      return Section(p, &broken, name, ref.anchor, name);
    }
    return Section(p, ref.node, name, ref.anchor, name);
  };

  const Section job = open("job", Presence::required);
  build_job(p, job, config.job);
  // The Python jobman's queue mode runs the tasks of its queue file instead of command.cmd: running the command would
  // be another job than the one asked for. A queue that is off is the usual job.
  if (const Section queue(p, job.get("queue"), job.path("queue"), job.origin("queue"), "job.queue");
      queue.present() && queue.boolean("enabled").value_or(false)) {
    p.error(queue.origin("enabled"), queue.path("enabled"),
            "the Python jobman's queue mode (tasks from a queue file instead of command.cmd) is not supported",
            "set enabled: false, or remove job.queue, to run command.cmd");
  }
  const Section tpu = open("tpu", Presence::required);
  const auto accelerator = build_tpu(p, tpu, ctx, config.job, config.tpu);

  if (const Section s = open("gcsfuse", Presence::optional); s.present()) {
    GcsfuseSection out;
    out.bucket_name = s.str("bucket_name", Presence::required).value_or("");
    if (out.bucket_name.starts_with("gs://")) {
      p.error(s.origin("bucket_name"), s.path("bucket_name"), "write the bucket name without gs://",
              "e.g. " + out.bucket_name.substr(5));
    }
    out.mount_path = s.str("mount_path", Presence::required).value_or("");
    out.flags = s.str_list("flags");
    if (const Node* read = s.get("expected_read_gb"); read != nullptr && !read->is_null()) {
      out.expected_read_gb = as_double(p, *read, s.path("expected_read_gb"), 0.0);
    }
    const auto& at = s.origin("bucket_name");
    out.bucket_origin = SourceLocation{at.file, at.line, at.column, s.path("bucket_name")};
    config.gcsfuse = out;
  }
  if (const Section s = open("ssh", Presence::optional); s.present()) {
    SshSection out;
    out.private_key = s.str("private_key").value_or("");
    if (const Node* identities = s.get("identities"); identities != nullptr && !identities->is_null()) {
      if (identities->is_sequence()) {
        for (std::size_t i = 0; i < identities->items.size(); ++i) {
          const Node& item = identities->items[i];
          const std::string path = s.path("identities") + "[" + std::to_string(i) + "]";
          const Section identity(p, &item, path, item.origin, "ssh.identities[]");
          if (!identity.present()) {
            if (item.is_null()) {
              p.error(item.origin, path, "expected a mapping with private_key, public_key, config_entry, got null");
            }
            continue;
          }
          SshIdentity entry;
          entry.private_key = identity.str("private_key", Presence::required).value_or("");
          entry.public_key = identity.str("public_key").value_or("");
          entry.config_entry = identity.str("config_entry").value_or("");
          out.identities.push_back(entry);
        }
      } else if (!identities->unresolved) {
        p.error(identities->origin, s.path("identities"),
                "expected a list of identities, got " + detail::describe_kind(*identities));
      }
    }
    config.ssh = out;
  }
  const Section docker = open("docker", Presence::optional);
  if (docker.present()) {
    DockerSection out;
    out.image = docker.str("image").value_or("");
    out.flags = docker.str_list("flags");
    out.env_vars = docker.str_list("env_vars");
    out.mount_dirs = docker.str_list("mount_dirs");
    out.workdir = docker.str("workdir").value_or("");
    config.docker = out;
  }
  const Section conda = open("conda", Presence::optional);
  if (conda.present()) {
    CondaSection out;
    out.name = conda.str("name").value_or("");
    out.config_file = local_path(ctx, conda.str("config_file").value_or(""));
    config.conda = out;
  }
  const Section venv = open("venv", Presence::optional);
  if (venv.present()) {
    VenvSection out;
    out.name = venv.str("name").value_or("");
    out.requirements_file = local_path(ctx, venv.str("requirements_file").value_or(""));
    out.python = venv.str("python").value_or("");
    config.venv = out;
  }

  if (const Section s = open("setup", Presence::optional); s.present()) {
    config.setup = build_setup(p, s, ctx);
  }
  if (const Section s = open("remote", Presence::optional); s.present()) {
    config.remote = RemoteSection{s.boolean("internal_ip").value_or(false)};
  }

  const Section command = open("command", Presence::required);
  // An empty command runs as the Python jobman runs it: the workers are set up, and nothing more.
  if (const Node* cmd = command.get("cmd");
      cmd != nullptr && cmd->is_scalar() && !cmd->unresolved && util::trim(cmd->text).empty()) {
    p.warn(cmd->origin, command.path("cmd"), "the command is empty: the job sets the workers up and ends");
  } else {
    config.command.cmd = command.str("cmd", Presence::required).value_or("");
  }
  config.command.workers = build_workers(p, command.get("workers"), command.path("workers"), accelerator);

  const Section recovery = open("recovery", Presence::optional);
  build_recovery(p, recovery, Origin{ctx.file, 0, 0}, config.job.loop, config.recovery);
  if (config.recovery.loss_spike && (config.job.progress.empty() || config.job.loss.empty())) {
    p.error(recovery.origin("loss_spike"), recovery.path("loss_spike"),
            std::string("a loss spike is found on step lines: it needs job.") +
                (config.job.progress.empty() ? "progress" : "loss") + ", which is turned off");
  }

  if (const SectionRef vars = section_ref(root, "vars", ctx.file); vars.node != nullptr && !vars.node->is_null()) {
    if (vars.node->is_mapping()) {
      for (const auto& entry : vars.node->entries) {
        const std::string path = join_path("vars", entry.key);
        if (!matches(entry.key, variable_name_form())) {
          p.error(entry.key_origin, path, "'" + entry.key + "' is not a variable name",
                  "use letters, digits, '_' and '-', starting with a letter");
        } else if (entry.value.is_null()) {
          config.vars[entry.key] = "";
        } else if (entry.value.is_scalar()) {
          config.vars[entry.key] = entry.value.text;
        } else if (!entry.value.unresolved) {
          p.error(entry.value.origin, path,
                  "expected a single value (string or number), got " + detail::describe_kind(entry.value));
        }
      }
    } else if (!vars.node->unresolved) {
      p.error(vars.node->origin, "vars",
              "expected a mapping of variable names to values, got " + detail::describe_kind(*vars.node));
    }
  }

  if (const Section s = open("brevo_email", Presence::optional); s.present()) {
    EmailSection out;
    out.api_key = s.str("api_key").value_or("");
    out.sender = s.str("sender").value_or("");
    out.receiver = s.str("receiver").value_or("");
    config.email = out;
  }
  if (const Section s = open("notify", Presence::optional); s.present()) {
    config.notify = build_notify(p, s, ctx);
  }

  // The environment named by job.env_type is built from its section. Without one, the command runs bare, as the
  // Python jobman runs it (it builds an environment only when its section exists); the others are left unused.
  const struct {
    EnvType type;
    const char* name;
    const Section* section;
    const char* key;
  } envs[] = {{EnvType::docker, "docker", &docker, "image"},
              {EnvType::conda, "conda", &conda, "name"},
              {EnvType::venv, "venv", &venv, "name"}};
  const Origin env_at = job.origin("env_type");
  const EnvType named = config.job.env_type;
  for (const auto& env : envs) {
    if (env.type == named && !env.section->present()) {
      p.warn(env_at, "job.env_type",
             std::string("env_type is ") + env.name + " but the config has no " + env.name +
                 " section: the command runs without an environment (add " + env.name + "." + env.key +
                 " to build one)");
      config.job.env_type = EnvType::none;
    } else if (env.type == named) {
      if (env.section->get(env.key) == nullptr || env.section->get(env.key)->is_null()) {
        env.section->missing(env.key, std::string("job.env_type is ") + env.name);
      }
    } else if (env.section->present()) {
      const SectionRef ref = section_ref(root, env.name, ctx.file);
      p.warn(ref.anchor, env.name, "section not used: job.env_type is " + to_string(named));
    }
  }
  const auto check_file = [&](const Section& s, const std::string& key, const std::string& path) {
    if (!path.empty() && !std::filesystem::exists(path)) {
      p.warn(s.origin(key), s.path(key), "file not found: " + path);
    }
  };
  if (config.job.env_type == EnvType::conda && config.conda) {
    check_file(conda, "config_file", config.conda->config_file);
  }
  if (config.job.env_type == EnvType::venv && config.venv) {
    check_file(venv, "requirements_file", config.venv->requirements_file);
  }
  return config;
}

} // namespace jobman::config::detail
