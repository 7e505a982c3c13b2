#include "mock_cloud/host_sshd.hpp"

#include "jobman/util/error.hpp"
#include "jobman/util/process.hpp"
#include "jobman/util/strings.hpp"
#include "jobman/util/system.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace jobman::mock::host_sshd {

namespace fs = std::filesystem;

namespace {

// An account of the host's passwd.
struct Account {
  uid_t uid = 0;    // Its uid.
  gid_t gid = 0;    // Its primary group.
  std::string home; // Its home directory, as the host sees it.
};

// The accounts of a passwd file, by name.
std::map<std::string, Account> read_passwd(const fs::path& file) {
  std::map<std::string, Account> accounts;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto fields = util::split(line, ':');
    if (fields.size() < 7) {
      continue;
    }
    const auto uid = util::parse_int(fields[2]);
    const auto gid = util::parse_int(fields[3]);
    if (uid && gid) {
      accounts[fields[0]] = {static_cast<uid_t>(*uid), static_cast<gid_t>(*gid), fields[5]};
    }
  }
  return accounts;
}

// This machine's system accounts (ids below 1000, and nobody) from `file` (/etc/passwd or /etc/group), as lines;
// root's home becomes /home/root, where the host keeps it.
std::string system_entries(const fs::path& file, bool passwd) {
  std::ifstream in(file);
  std::string line;
  std::string out;
  while (std::getline(in, line)) {
    auto fields = util::split(line, ':');
    const auto id = fields.size() > 2 ? util::parse_int(fields[2]) : std::nullopt;
    if (!id || (*id >= 1000 && *id != 65534)) {
      continue;
    }
    if (passwd && fields.size() >= 7 && fields[0] == "root") {
      fields[5] = "/home/root";
      fields[6] = "/bin/bash";
    }
    out += util::join(fields, ":") + "\n";
  }
  return out;
}

// The shadow line of an account that logs in with keys only ("*": no password, not locked).
std::string shadow_line(const std::string& name) {
  return name + ":*:19000:0:99999:7:::\n";
}

// Appends `text` to `file` in one write: a reader sees the file as it was or with the whole of `text`.
void append(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    throw Error("cannot open " + file.string() + ": " + std::strerror(errno));
  }
  const auto written = ::write(fd, text.data(), text.size());
  const int saved = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(text.size())) {
    throw Error("cannot append to " + file.string() + ": " + std::strerror(saved));
  }
}

// The first accounts of a host: this machine's system accounts as root, else the mock's own user alone.
void write_first_accounts(const fs::path& dir) {
  std::string passwd;
  std::string group;
  std::set<std::string> names;
  if (::geteuid() == 0) {
    passwd = system_entries("/etc/passwd", true);
    group = system_entries("/etc/group", false);
  } else {
    const auto user = util::current_user();
    passwd = user + ":x:" + std::to_string(::geteuid()) + ":" + std::to_string(::getegid()) + "::/home/" + user +
             ":/bin/bash\n";
    group = user + ":x:" + std::to_string(::getegid()) + ":\n";
  }
  std::string shadow;
  for (const auto& line : util::split(passwd, '\n')) {
    if (!line.empty()) {
      shadow += shadow_line(line.substr(0, line.find(':')));
    }
  }
  util::write_file_atomic(dir / "group", group, 0644);
  util::write_file_atomic(dir / "shadow", shadow, 0600);
  util::write_file_atomic(dir / "passwd", passwd, 0644);
}

// Makes `path` a directory owned by uid:gid, mode 0755, unless it is one already.
void ensure_owned_directory(const fs::path& path, uid_t uid, gid_t gid) {
  if (::mkdir(path.c_str(), 0755) == 0) {
    if (::chown(path.c_str(), uid, gid) != 0 && ::geteuid() == 0) {
      throw Error("cannot give " + path.string() + " to uid " + std::to_string(uid) + ": " + std::strerror(errno));
    }
  } else if (errno != EEXIST) {
    throw Error("cannot create " + path.string() + ": " + std::strerror(errno));
  }
}

// sshd_config's quoting: a token in double quotes (sshd has no escape for a quote inside one).
std::string config_token(const std::string& token) {
  return "\"" + token + "\"";
}

// An IPv4 socket address.
sockaddr_in socket_address(const std::string& address, int port) {
  sockaddr_in out{};
  out.sin_family = AF_INET;
  out.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &out.sin_addr) != 1) {
    throw Error("'" + address + "' is not an IPv4 address");
  }
  return out;
}

} // namespace

std::string ensure_host_key(const fs::path& keygen, const SshHost& host) {
  const auto dir = host.dir / ".mock" / "ssh";
  util::ensure_directory(dir, 0755);
  const auto key = dir / "ssh_host_ed25519_key";
  std::error_code ec;
  if (!fs::exists(fs::path(key.string() + ".pub"), ec) || !fs::exists(key, ec)) {
    fs::remove(key, ec);
    fs::remove(fs::path(key.string() + ".pub"), ec);
    util::ProcessBuilder make(
        {keygen.string(), "-q", "-t", "ed25519", "-N", "", "-C", "root@" + host.hostname, "-f", key.string()});
    make.input(util::Stream::null()).output(util::Stream::null()).error(util::Stream::null());
    const int status = util::wait_exit(make.spawn().pid);
    if (status != 0) {
      throw Error(keygen.string() + " could not make the host key " + key.string() + " (exit " +
                  std::to_string(status) + ")");
    }
  }
  const auto parts = util::split(std::string(util::trim(util::read_file(key.string() + ".pub"))), ' ');
  if (parts.size() < 2) {
    throw Error(key.string() + ".pub is not a public key");
  }
  return parts[0] + " " + parts[1];
}

void sync_accounts(const SshHost& host, const std::vector<SshKey>& keys) {
  const auto accounts_dir = host.dir / ".mock" / "accounts";
  util::ensure_directory(accounts_dir, 0755);
  if (!fs::exists(accounts_dir / "passwd")) {
    write_first_accounts(accounts_dir);
  }
  auto accounts = read_passwd(accounts_dir / "passwd");
  std::map<std::string, std::string> authorized;
  for (const auto& key : keys) {
    authorized[key.user] += key.key + "\n";
  }
  uid_t next = kFirstAccountId;
  for (const auto& [name, account] : accounts) {
    if (account.uid >= next) {
      next = account.uid + 1;
    }
  }
  const auto homes = host.dir / "homes";
  util::ensure_directory(homes, 0755);
  std::set<std::string> users = {"root"};
  for (const auto& [user, lines] : authorized) {
    users.insert(user);
  }
  for (const auto& user : users) {
    auto it = accounts.find(user);
    if (it == accounts.end()) {
      if (::geteuid() != 0) {
        continue; // Only root can switch to an account of its own making.
      }
      const Account made{next, next, "/home/" + user};
      ++next;
      append(accounts_dir / "group", user + ":x:" + std::to_string(made.gid) + ":\n");
      append(accounts_dir / "shadow", shadow_line(user));
      append(accounts_dir / "passwd", user + ":x:" + std::to_string(made.uid) + ":" + std::to_string(made.gid) +
                                          "::" + made.home + ":/bin/bash\n");
      it = accounts.emplace(user, made).first;
    }
    const fs::path home = it->second.home;
    if (home.parent_path() == "/home") {
      ensure_owned_directory(homes / home.filename(), it->second.uid, it->second.gid);
    }
  }
  const auto keys_dir = host.dir / ".mock" / "keys";
  util::ensure_directory(keys_dir, 0755);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(keys_dir, ec)) {
    if (authorized.count(entry.path().filename().string()) == 0) {
      fs::remove(entry.path(), ec);
    }
  }
  for (const auto& [user, lines] : authorized) {
    if (accounts.count(user) > 0) {
      util::write_file_atomic(keys_dir / user, lines, 0644);
    }
  }
}

void write_config(const SshHost& host) {
  const auto dir = host.dir / ".mock" / "ssh";
  std::ostringstream config;
  config << "HostKey " << config_token((dir / "ssh_host_ed25519_key").string())
         << "\n"
         // Read as the server's own user, not the one logging in: the way to the keys (a test's private temporary
         // directory, say) need not be open to the host's accounts.
         << "AuthorizedKeysFile none\n"
         << "AuthorizedKeysCommand /bin/cat " << config_token((host.dir / ".mock" / "keys" / "%u").string()) << "\n"
         << "AuthorizedKeysCommandUser " << util::current_user() << "\n"
         << "PidFile none\n"
         << "UsePAM no\n"
         << "StrictModes no\n"
         << "PasswordAuthentication no\n"
         << "KbdInteractiveAuthentication no\n"
         << "PermitRootLogin prohibit-password\n"
         << "PrintMotd no\n"
         << "PrintLastLog no\n"
         << "MaxSessions 1000\n"
         << "Subsystem sftp internal-sftp\n"
         << "LogLevel ERROR\n";
  std::string set_env;
  for (const auto& [name, value] : host.session_env) {
    if (value.find('"') == std::string::npos) {
      std::string setting = name;
      setting.append("=").append(value);
      set_env.append(" ").append(config_token(setting));
    }
  }
  if (!set_env.empty()) {
    config << "SetEnv" << set_env << "\n";
  }
  util::ensure_directory(dir, 0755);
  util::write_file_atomic(dir / "sshd_config", config.str(), 0644);
  // sshd's privilege separation directory, on the host's own /run.
  util::ensure_directory(host.dir / "root" / "run" / "sshd", 0755);
}

std::vector<int> listen_on(const SshHost& host) {
  std::vector<int> sockets;
  const auto give_up = [&sockets](const std::string& why) {
    for (const int fd : sockets) {
      ::close(fd);
    }
    throw Error(why);
  };
  for (const auto& address : host.addresses) {
    const auto target = socket_address(address, host.port);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      give_up(std::string("cannot make a socket: ") + std::strerror(errno));
    }
    sockets.push_back(fd);
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0 || ::listen(fd, 128) != 0) {
      give_up("cannot listen on " + address + ":" + std::to_string(host.port) + ": " + std::strerror(errno));
    }
  }
  return sockets;
}

pid_t serve_connection(const fs::path& sshd, const fs::path& host_login, const SshHost& host, int connection) {
  const auto dir = host.dir / ".mock" / "ssh";
  std::vector<std::string> argv = {host_login.string(),
                                   "--root",
                                   (host.dir / "root").string(),
                                   "--homes",
                                   (host.dir / "homes").string(),
                                   "--accounts",
                                   (host.dir / ".mock" / "accounts").string(),
                                   "--hostname",
                                   host.hostname};
  if (!host.gcs.empty()) {
    argv.insert(argv.end(), {"--gcs", host.gcs.string(), "--sandbox", host.dir.string()});
  }
  if (::geteuid() == 0) {
    argv.emplace_back("--every-user");
  }
  for (const auto& keep : host.keep) {
    argv.insert(argv.end(), {"--keep", keep.string()});
  }
  for (const auto& keep : host.keep_read_only) {
    argv.insert(argv.end(), {"--keep-read-only", keep.string()});
  }
  argv.insert(argv.end(), {"--", sshd.string(), "-i", "-e", "-f", (dir / "sshd_config").string()});
  util::ProcessBuilder process(argv);
  process.clear_env().env(host.env).directory(host.dir);
  process.input(util::Stream::descriptor(connection))
      .output(util::Stream::descriptor(connection))
      .error(util::Stream::file(dir / "sshd.log"));
  process.group(util::ProcessGroup::new_session);
  return process.spawn().pid;
}

bool await_listening(const std::string& address, int port, std::chrono::milliseconds limit) {
  const auto target = socket_address(address, port);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return false;
    }
    const bool accepted = ::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0;
    ::close(fd);
    if (accepted) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool port_free(const std::string& address, int port) {
  const auto target = socket_address(address, port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0;
  ::close(fd);
  return bound;
}

int free_port() {
  auto target = socket_address("127.0.0.1", 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t length = sizeof target;
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&target), &length) != 0) {
    const int saved = errno;
    if (fd >= 0) {
      ::close(fd);
    }
    throw Error(std::string("cannot find a free port for the hosts' sshd: ") + std::strerror(saved));
  }
  ::close(fd);
  return ntohs(target.sin_port);
}

} // namespace jobman::mock::host_sshd
