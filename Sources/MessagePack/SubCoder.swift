/// What `superEncoder()` and `superDecoder()` hand out: a coder for the one value at `start`, under `path`.
///
/// Its subclasses point the encoder or decoder at that value before they hand out a container.
class SubCoder<Impl: CodingPathStack> {
    let impl: Impl
    let path: [any CodingKey]
    let start: Int

    init(impl: Impl, path: [any CodingKey], start: Int) {
        self.impl = impl
        self.path = path
        self.start = start
    }

    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { impl.userInfo }
}
