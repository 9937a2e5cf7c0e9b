import Foundation
import JetbridgeProtocol
import Logging
import ZeroMQ

/// The sockets the network thread owns; handed to it once, used by it alone.
struct NetworkLoop: @unchecked Sendable {
    let pull: Socket
    let router: Socket
    /// Acks (two frames: routing id, ack) and control messages (one frame) from the store thread.
    let acks: Socket
}

/// One-frame control messages on the inproc socket from the store thread.
enum StoreSignal {
    /// The queue had been full and has room now.
    static let room = Data("room".utf8)
    /// The store thread has committed and acked its last batch and is gone.
    static let done = Data("done".utf8)
}

extension AggregatorServer {
    func runNetwork(_ sockets: NetworkLoop, allowlist: DeviceAllowlist) {
        var accepting = true
        var storeDone = false
        var allowlistStamp = Self.stamp(of: home.devicesFile)
        var lastAllowlistCheck = ContinuousClock.now
        do {
            while !storeDone {
                if accepting && stopRequested {
                    // Stop taking new batches. What sits in the PULL queue is dropped unacked: the devices resend it.
                    accepting = false
                    try sockets.pull.close(linger: .zero)
                    queue.close()
                }
                let readPull = accepting && queue.hasRoom
                var items = [PollItem(sockets.acks, .readable), PollItem(sockets.router, .readable)]
                if readPull { items.append(PollItem(sockets.pull, .readable)) }
                let ready = try poll(items, timeout: .milliseconds(100))
                if ready[0].contains(.readable) { storeDone = try forwardAcks(sockets) }
                if ready[1].contains(.readable) { try readHellos(sockets.router) }
                if readPull && ready[2].contains(.readable) { try readBatches(sockets) }

                let now = ContinuousClock.now
                let reload = state.withLock { state in
                    defer { state.reloadRequested = false }
                    return state.reloadRequested
                }
                if reload || now - lastAllowlistCheck >= .seconds(1) {
                    lastAllowlistCheck = now
                    let stamp = Self.stamp(of: home.devicesFile)
                    if reload || stamp != allowlistStamp {
                        allowlistStamp = stamp
                        reloadAllowlist()
                    }
                }
            }
        } catch {
            fail(AggregatorError(.other, "the network thread stopped: \(error)"))
            queue.close()
            // Keep draining the store thread's acks until it is done, so it never blocks on a full inproc pipe.
            while !storeDone {
                guard let frames = try? sockets.acks.receiveMultipart() else { break }
                storeDone = frames.count == 1 && frames[0] == StoreSignal.done
            }
        }
        if !sockets.pull.isClosed { try? sockets.pull.close(linger: .zero) }
        // The last acks are queued in the ROUTER: linger gives them a second to leave.
        try? sockets.router.close(linger: Self.ackLinger)
        try? sockets.acks.close(linger: .zero)
    }

    /// Sends the acks the store thread passed back. Returns true once the store thread said it is done.
    private func forwardAcks(_ sockets: NetworkLoop) throws -> Bool {
        for _ in 0..<1_000 {
            guard let frames = try sockets.acks.receiveMultipart(options: .dontWait) else { return false }
            if frames.count == 1 {
                if frames[0] == StoreSignal.done { return true }
                continue  // `room`: the poll loop reads the data socket again
            }
            sendAck(frames, router: sockets.router)
        }
        return false
    }

    /// Sends one `[routing id, ack]` on the ROUTER. An ack for a device that is not connected (EHOSTUNREACH) or not
    /// reading (EAGAIN at the high-water mark) is dropped: the device resends the batch, and the resend is a duplicate.
    func sendAck(_ frames: [Data], router: Socket) {
        do {
            try router.send(frames, options: .dontWait)
        } catch {
            statistics.withLock { $0.unroutableAcks += 1 }
            logger.debug(
                "ack dropped; the device will resend",
                metadata: ["device": "\(String(decoding: frames[0], as: UTF8.self))", "error": "\(error.text)"])
        }
    }

    /// Reads hellos: the ROUTER learns the route from the connection itself, so a hello only needs checking.
    private func readHellos(_ router: Socket) throws {
        for _ in 0..<1_000 {
            guard let message = try router.receiveWithMetadata(options: .dontWait) else { return }
            let routingID = String(decoding: message.frames.first ?? Data(), as: UTF8.self)
            guard message.frames.count == 2, let hello = try? WireCoding.decode(Hello.self, from: message.frames[1]),
                hello.type == Hello.messageType
            else {
                logger.debug("ignored a message on the ack channel that is not a hello", metadata: ["from": "\(routingID)"])
                continue
            }
            if let userID = message.userID, userID != routingID || hello.device != userID {
                logger.warning(
                    "ignored a hello whose routing id or device is not the connection's key",
                    metadata: ["key": "\(userID)", "routingID": "\(routingID)", "device": "\(hello.device)"])
                continue
            }
            statistics.withLock { $0.hellos += 1 }
            logger.debug("hello", metadata: ["device": "\(hello.device)"])
        }
    }

    /// Reads and checks batches while the queue has room.
    private func readBatches(_ sockets: NetworkLoop) throws {
        for _ in 0..<64 {
            guard queue.hasRoom, let message = try sockets.pull.receiveWithMetadata(options: .dontWait) else { return }
            let size = message.frames.reduce(0) { $0 + $1.count }
            // In CURVE mode every connection has a User-Id from the ZAP handler; one without it matches no device.
            let authenticated: String? = insecure ? nil : (message.userID ?? "")
            switch IncomingBatch.decode(frames: message.frames, authenticatedDevice: authenticated) {
            case .success(let batch):
                queue.push(.batch(batch, bytes: size))
            case .failure(let rejection):
                refuse(rejection, authenticated: authenticated, router: sockets.router)
            }
        }
    }

    /// Answers a refused batch at once (nothing of it is stored, so there is no commit to wait for) and counts it.
    private func refuse(_ rejection: BatchRejection, authenticated: String?, router: Socket) {
        statistics.withLock { $0.rejectedBatches += 1 }
        let device = rejection.header?.device
        logger.warning(
            "batch refused",
            metadata: [
                "device": "\(device ?? "?")", "key": "\(authenticated ?? "-")", "status": "\(rejection.status.rawValue)",
                "index": "\(rejection.index)", "reason": "\(rejection.reason)",
            ])
        // The ack goes back to the connection that sent it: by key in CURVE mode (a forbidden header names someone
        // else), by the header's device on trust otherwise.
        if let ack = rejection.ack, let route = authenticated ?? device, let payload = try? WireCoding.encode(ack) {
            sendAck([Data(route.utf8), payload], router: router)
        }
        // Counted against the device that sent it: the key's device when known.
        if let owner = authenticated ?? device, !owner.isEmpty {
            queue.push(.rejection(device: owner, reason: rejection.description))
        }
    }

    private func reloadAllowlist() {
        guard let zap else { return }
        do {
            let list = try DeviceAllowlist.load(from: home.devicesFile)
            zap.replaceAllowlist(list.byPublicKey)
            logger.info(
                "allow list reloaded; applies to new connections",
                metadata: ["devices": "\(list.devices.count)", "file": "\(home.devicesFile.path)"])
        } catch {
            logger.error("allow list not reloaded; keeping the previous one", metadata: ["error": "\(error)"])
        }
    }

    /// What changes when the allow list file is replaced: modification time, inode and size.
    static func stamp(of url: URL) -> [Int] {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return [] }
        return [
            Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ino), Int(info.st_size),
        ]
    }
}
