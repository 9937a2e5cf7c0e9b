/// The coding path of an encoder or a decoder, kept the same way by both.
///
/// One array of keys serves the whole value, with `depth` saying how many are current: entering a nested value
/// stores one key instead of copying the path, and a container that is used again after a sibling overwrote its
/// entry puts its own key back (`restore`).
protocol CodingPathStack: AnyObject {
    /// Keys of the current coding path; only the first `depth` are meaningful.
    var keys: [any CodingKey] { get set }
    var depth: Int { get set }
    /// `Encoder.userInfo` or `Decoder.userInfo`.
    var userInfo: [CodingUserInfoKey: Any] { get }
}

extension CodingPathStack {
    var codingPath: [any CodingKey] { Array(keys.prefix(depth)) }

    /// The coding path of a container at `depth` opened under `parentKey`, or the current path up to `depth` when
    /// the container has no key of its own (the top level, or a key the path still holds).
    func path(depth: Int, parentKey: (any CodingKey)?) -> [any CodingKey] {
        guard let parentKey else { return Array(keys.prefix(depth)) }
        return Array(keys.prefix(depth - 1)) + [parentKey]
    }

    /// Makes `key` the last key of the path of a value at `depth` (`keys[depth - 1]`).
    @inline(__always)
    func setKey(_ key: any CodingKey, depth: Int) {
        if keys.count >= depth {
            keys[depth - 1] = key
        } else {
            keys.append(key)
        }
    }

    /// Keeps `keys[depth - 1]` right for a container that may be used after a sibling changed it.
    @inline(__always)
    func restore(parentKey: (any CodingKey)?, depth: Int) {
        guard let parentKey else { return }
        setKey(parentKey, depth: depth)
    }

    /// Makes `path` the current coding path, for an encoder or decoder handed out by `superEncoder`/`superDecoder`.
    func enter(_ path: [any CodingKey]) {
        keys = path
        depth = path.count
    }
}
