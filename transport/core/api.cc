// The public classes (Context, Listener, Channel, Op): thin handles over ContextImpl.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "transport/core/bootstrap.h"
#include "transport/core/context_impl.h"

namespace tictac::transport {

// ---- Op -------------------------------------------------------------------
Status Op::status() const {
  // status_ is final once done_ is set (release in finish(), acquire here).
  if (done()) return status_;
  return {StatusCode::kInProgress, {}};
}

void Op::finish(const Status& status) {
  if (!status.isOk()) status_ = status;  // status_ starts as ok
  done_.store(true);
  if (waiting_.load()) {  // a blocking wait(): notify under mu_ so it cannot miss it
    std::lock_guard<std::mutex> lock(mu_);
    cv_->notify_all();
  }
}

Status Op::wait(std::chrono::milliseconds timeout) {
  if (!done() && ContextImpl::inCallbacks()) {
    return {StatusCode::kInvalidArgument,
            "wait: called inside a completion callback for an op that is not done (completions "
            "do not nest: it would wait forever)"};
  }
  auto deadline = timeout == std::chrono::milliseconds::max() ? Clock::time_point::max()
                                                              : Clock::now() + timeout;
  if (pump_) {  // set only without a progress thread (never empty)
    unsigned idle = 0, passes = 0;
    while (!done()) {
      // The clock every 16th pass (0.8 us a read on a guest whose clocksource is the HPET).
      if ((passes++ & 15) == 0 && Clock::now() >= deadline) {
        return {StatusCode::kTimeout, "wait: deadline passed"};
      }
      if ((*pump_)() == 0 && ++idle > 64) {
        std::this_thread::yield();
        idle = 0;
      }
    }
    return status();
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_) cv_ = std::make_unique<std::condition_variable>();
  waiting_.store(true);
  if (!cv_->wait_until(lock, deadline, [&] { return done_.load(); })) {  // seq_cst: see waiting_
    return {StatusCode::kTimeout, "wait: deadline passed"};
  }
  return status_;
}

// ---- Listener ---------------------------------------------------------------
class ListenerImpl {
 public:
  std::shared_ptr<ContextImpl> ctx;
  int fd = -1;
  uint16_t port = 0;
  std::atomic<bool> closed{false};  // close(): the fd is shut down, not yet closed
  ~ListenerImpl() {
    if (fd >= 0) ::close(fd);
  }
};

Listener::Listener(std::unique_ptr<ListenerImpl> impl) : impl_(std::move(impl)) {}
Listener::~Listener() = default;
uint16_t Listener::port() const {
  return impl_->port;
}

// shutdown() of a listening socket ends its LISTEN state (connections are
// refused) and wakes a poll() on it; the fd stays open until the destructor,
// so a thread inside accept() never meets a number reused by another file.
void Listener::close() {
  if (!impl_->closed.exchange(true)) ::shutdown(impl_->fd, SHUT_RDWR);
}

Result<std::shared_ptr<Channel>> Listener::accept(std::chrono::milliseconds timeout) {
  const Status closed(StatusCode::kCanceled, "listener is closed");
  if (impl_->closed.load()) return closed;
  std::string name;
  auto fd = bootstrap::acceptTcp(impl_->fd, std::chrono::steady_clock::now() + timeout, &name);
  if (!fd) return impl_->closed.load() ? closed : fd.status();
  auto peer = impl_->ctx->setupPeer(fd.value(), false, name);
  if (!peer) return peer.status();
  return std::make_shared<Channel>(impl_->ctx, peer.value());
}

// ---- Context ----------------------------------------------------------------
Context::Context(std::shared_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

Result<std::shared_ptr<Context>> Context::create(const ContextOptions& options) {
  auto impl = ContextImpl::create(options);
  if (!impl) return impl.status();
  return std::make_shared<Context>(std::move(impl.value()));
}

Result<std::unique_ptr<Listener>> Context::listen(uint16_t port, const std::string& bind) {
  auto l = std::make_unique<ListenerImpl>();
  auto fd = bootstrap::listenTcp(bind, port, &l->port);
  if (!fd) return fd.status();
  l->fd = fd.value();
  l->ctx = impl_;
  return std::make_unique<Listener>(std::move(l));
}

Result<std::shared_ptr<Channel>> Context::connect(const std::string& host, uint16_t port) {
  auto deadline = std::chrono::steady_clock::now() + impl_->options().connect_timeout;
  auto fd = bootstrap::connectTcp(host, port, deadline);
  if (!fd) return fd.status();
  auto peer = impl_->setupPeer(fd.value(), true, host + ":" + std::to_string(port));
  if (!peer) return peer.status();
  return std::make_shared<Channel>(impl_, peer.value());
}

Status Context::registerMemory(const void* addr, size_t len) {
  return impl_->registerMemory(addr, len);
}
void Context::releaseMemory(const void* addr, size_t len) {
  impl_->releaseMemory(addr, len);
}
RegistrationStats Context::registrationStats() const {
  return impl_->registrationStats();
}
std::vector<int> Context::progressCpus() const {
  return impl_->progressCpus();
}
ReceiveStats Context::receiveStats() const {
  return impl_->receiveStats();
}

std::vector<PriorityStats> Context::priorityStats() const {
  return impl_->priorityStats();
}
unsigned Context::progress() {
  return impl_->progress();
}
unsigned Context::progress(std::chrono::microseconds max_wait) {
  // Capped at a year: the conversion to nanoseconds cannot overflow.
  constexpr std::chrono::microseconds kCap = std::chrono::hours(24 * 365);
  // A callback may drop the last reference to this Context; progressFor()'s
  // sleeper count is touched after its last pass: `keep` holds the impl.
  std::shared_ptr<ContextImpl> keep = impl_;
  return keep->progressFor(std::clamp(max_wait, std::chrono::microseconds::zero(), kCap));
}
int Context::eventFd() {
  return impl_->eventFd();
}
bool Context::arm() {
  return impl_->arm();
}
const ContextOptions& Context::options() const {
  return impl_->options();
}
std::string Context::backendName() const {
  return impl_->backendName();
}

// ---- Channel ----------------------------------------------------------------
Channel::Channel(std::shared_ptr<ContextImpl> ctx, uint32_t peer)
    : ctx_(std::move(ctx)), peer_(peer) {}
Channel::~Channel() {
  close();
}

Result<OpHandle> Channel::send(const TensorKey& tensor, const void* buf, size_t len,
                               std::optional<Priority> priority, Completion completion) {
  return ctx_->send(peer_, tensor, buf, len, priority, std::move(completion));
}

Result<std::vector<OpHandle>> Channel::sendBatch(std::vector<SendItem> items) {
  return ctx_->sendBatch(peer_, items);
}

Result<OpHandle> Channel::expect(const TensorKey& tensor, void* dst, size_t len,
                                 Completion completion) {
  return ctx_->expect(peer_, tensor, dst, len, std::move(completion));
}

bool Channel::cancel(const OpHandle& op) {
  return ctx_->cancel(peer_, op);
}
void Channel::close() {
  ctx_->closePeer(peer_);
}
bool Channel::alive() const {
  return ctx_->peerAlive(peer_);
}
std::string Channel::peerName() const {
  return ctx_->peerName(peer_);
}
uint32_t Channel::peerId() const {
  return peer_;
}

}  // namespace tictac::transport
